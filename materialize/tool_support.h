// What stoker-materialize and stoker-profile share around their work: a stop
// flag raised by Ctrl-C or SIGTERM, and the progress report drawn as a bar
// or written as log lines (common/progress_bar.h formats both).
#ifndef STOKER_MATERIALIZE_TOOL_SUPPORT_H_
#define STOKER_MATERIALIZE_TOOL_SUPPORT_H_

#include <atomic>

#include "absl/strings/string_view.h"
#include "common/progress_bar.h"

namespace stoker {

// Installs SIGINT and SIGTERM handlers that raise the returned flag (once
// per process; the work stops after what is under way).
const std::atomic<bool>* CancelOnSignals();

// One report: the bar redrawn in place on stderr, or an INFO log line
// "<verb> <figures>"; nothing for kNone.
void ShowProgress(ProgressStyle style, const ProgressFigures& figures, absl::string_view verb);

}  // namespace stoker

#endif  // STOKER_MATERIALIZE_TOOL_SUPPORT_H_
