#include "common/log_level.h"

#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace stoker {

absl::StatusOr<int> ParseLogLevel(absl::string_view level) {
  const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(level));
  int number = 0;
  if (absl::SimpleAtoi(name, &number) && number >= 0 && number <= 3) return number;
  if (name == "debug" || name == "info") return 0;
  if (name == "warning" || name == "warn") return 1;
  if (name == "error") return 2;
  if (name == "fatal" || name == "critical") return 3;
  return absl::InvalidArgumentError(absl::StrCat("log level '", level,
                                                 "': expected debug, info, warning, error, or 0-3 (glog's INFO "
                                                 "to FATAL)"));
}

void ApplyLogLevelFromEnv() {
  const char* env = std::getenv("STOKER_LOG_LEVEL");
  if (env == nullptr || *env == '\0') return;
  const absl::StatusOr<int> level = ParseLogLevel(env);
  if (!level.ok()) {
    LOG(WARNING) << "STOKER_LOG_LEVEL ignored: " << level.status().message();
    return;
  }
  FLAGS_minloglevel = *level;
}

}  // namespace stoker
