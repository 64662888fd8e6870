// What a training job's name (SessionConfig.job) may hold: the server's check
// (CheckJob) and the client's default name (DefaultJobName) share this rule.
#ifndef STOKER_COMMON_JOB_NAME_H_
#define STOKER_COMMON_JOB_NAME_H_

#include <cstddef>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace stoker {

inline constexpr size_t kMaxJobNameLength = 128;
// Allowed besides letters and digits.
inline constexpr absl::string_view kJobNamePunctuation = "._:/@+-";

inline bool IsJobNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || absl::StrContains(kJobNamePunctuation, c);
}

}  // namespace stoker

#endif  // STOKER_COMMON_JOB_NAME_H_
