// A one-line progress report for long-running tools (stoker-materialize,
// stoker-profile): a bar with done/total, the rate and the time left on a
// terminal, the same figures as a plain log line otherwise. Pure functions;
// thread-safe.
#ifndef STOKER_COMMON_PROGRESS_BAR_H_
#define STOKER_COMMON_PROGRESS_BAR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace stoker {

struct ProgressFigures {
  int64_t done = 0;
  int64_t total = 0;
  double per_second = 0;                          // of `unit`
  absl::Duration eta = absl::InfiniteDuration();  // infinite: not known yet
  std::string unit = "samples";
  std::string note;  // appended, e.g. "3 failed"
};

// "[#########...........]  450/1000  45.0%  812.3 samples/s  ETA 0:00:41  3 failed",
// the bar `width` characters wide.
std::string ProgressBar(const ProgressFigures& p, int width = 30);
// "450/1000 samples (45.0%), 812.3 samples/s, ETA 0:00:41, 3 failed".
std::string ProgressLine(const ProgressFigures& p);
// "1:02:03", or "?" for an infinite duration.
std::string FormatEta(absl::Duration d);

enum class ProgressStyle { kNone, kBar, kLog };
// A tool's --progress: "auto" (a bar when `terminal`, log lines otherwise),
// "bar", "log" or "none". INVALID_ARGUMENT names the value.
absl::StatusOr<ProgressStyle> ParseProgressStyle(absl::string_view flag, bool terminal);

}  // namespace stoker

#endif  // STOKER_COMMON_PROGRESS_BAR_H_
