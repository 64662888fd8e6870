// One switch for how much Stoker logs, in the servers and tools (glog) and in
// the Python loader (Python's logging, fed by LogQueue): STOKER_LOG_LEVEL, or
// the loader's log_level=. Names (debug, info, warning, error, case-
// insensitive) or glog's numbers (0 INFO, 1 WARNING, 2 ERROR, 3 FATAL).
#ifndef STOKER_COMMON_LOG_LEVEL_H_
#define STOKER_COMMON_LOG_LEVEL_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

// glog's severity (0 INFO .. 3 FATAL) for a level's name or number; debug is
// INFO (glog's finer levels are VLOG's). InvalidArgument names what it takes.
absl::StatusOr<int> ParseLogLevel(absl::string_view level);

// Sets glog's minimum level from STOKER_LOG_LEVEL when it is set (a bad value
// is logged and ignored); the programs call it after InitGoogleLogging.
void ApplyLogLevelFromEnv();

}  // namespace stoker

#endif  // STOKER_COMMON_LOG_LEVEL_H_
