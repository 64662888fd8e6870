#include "common/progress_bar.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker {
namespace {

double Fraction(const ProgressFigures& p) {
  if (p.total <= 0) return 0;
  return std::clamp(static_cast<double>(p.done) / static_cast<double>(p.total), 0.0, 1.0);
}

}  // namespace

absl::StatusOr<ProgressStyle> ParseProgressStyle(absl::string_view flag, bool terminal) {
  if (flag == "auto") return terminal ? ProgressStyle::kBar : ProgressStyle::kLog;
  if (flag == "bar") return ProgressStyle::kBar;
  if (flag == "log") return ProgressStyle::kLog;
  if (flag == "none") return ProgressStyle::kNone;
  return absl::InvalidArgumentError(absl::StrCat("--progress '", flag, "' is not one of auto, bar, log, none"));
}

std::string FormatEta(absl::Duration d) {
  if (d == absl::InfiniteDuration() || d < absl::ZeroDuration()) return "?";
  const int64_t s = absl::ToInt64Seconds(d);
  return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
}

std::string ProgressBar(const ProgressFigures& p, int width) {
  const int filled = static_cast<int>(Fraction(p) * width + 0.5);
  std::string line = absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "] ");
  absl::StrAppendFormat(&line, "%d/%d  %.1f%%  %.1f %s/s  ETA %s", p.done, p.total, 100 * Fraction(p), p.per_second,
                        p.unit, FormatEta(p.eta));
  if (!p.note.empty()) absl::StrAppend(&line, "  ", p.note);
  return line;
}

std::string ProgressLine(const ProgressFigures& p) {
  std::string line = absl::StrFormat("%d/%d %s (%.1f%%), %.1f %s/s, ETA %s", p.done, p.total, p.unit, 100 * Fraction(p),
                                     p.per_second, p.unit, FormatEta(p.eta));
  if (!p.note.empty()) absl::StrAppend(&line, ", ", p.note);
  return line;
}

}  // namespace stoker
