#include "client/device/mixup.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/rng.h"

namespace stoker {
namespace {

// Keeps the mixing draws apart from every other use of the session's seed.
constexpr uint64_t kMixDomain = 0x4d49585550000003ULL;  // "MIXUP"

}  // namespace

absl::Status ValidateMixup(const MixupOptions& o) {
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"mixup_alpha", o.mixup_alpha}, {"cutmix_alpha", o.cutmix_alpha}}) {
    if (!(value >= 0) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " = ", value, "; need a finite value >= 0 (0 turns it off)"));
    }
  }
  if (!o.enabled()) return absl::InvalidArgumentError("mixup_alpha and cutmix_alpha are both 0: nothing to mix");
  for (const auto& [name, value] : {std::pair<const char*, double>{"mix_prob", o.mix_prob},
                                    {"switch_prob", o.switch_prob},
                                    {"label_smoothing", o.label_smoothing}}) {
    if (!(value >= 0 && value <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " = ", value, "; allowed range is 0..1"));
    }
  }
  if (o.num_classes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_classes = ", o.num_classes, "; give the number of classes (0: the dataset's)"));
  }
  return absl::OkStatus();
}

MixDraw DrawMix(const MixupOptions& o, int64_t epoch, int64_t batch, int64_t height, int64_t width) {
  Rng rng(Mix64(Mix64(Mix64(o.seed ^ kMixDomain) + static_cast<uint64_t>(epoch)) + static_cast<uint64_t>(batch)));
  MixDraw draw;
  draw.raw.push_back(rng.UniformDouble());
  if (!(draw.raw[0] < o.mix_prob)) return draw;
  bool cutmix = o.cutmix_alpha > 0;
  if (o.mixup_alpha > 0 && o.cutmix_alpha > 0) {
    draw.raw.push_back(rng.UniformDouble());
    cutmix = draw.raw.back() < o.switch_prob;
  }
  const double alpha = cutmix ? o.cutmix_alpha : o.mixup_alpha;
  const double lam = BetaDraw(alpha, alpha, rng);
  draw.raw.push_back(lam);
  if (!cutmix) {
    draw.lam = lam;
    return draw;
  }
  const double ratio = std::sqrt(1.0 - lam);
  const int64_t cut_h = static_cast<int64_t>(static_cast<double>(height) * ratio);
  const int64_t cut_w = static_cast<int64_t>(static_cast<double>(width) * ratio);
  const int64_t cy = rng.UniformInt(0, height - 1), cx = rng.UniformInt(0, width - 1);
  draw.raw.push_back(static_cast<double>(cy));
  draw.raw.push_back(static_cast<double>(cx));
  draw.cutmix = true;
  draw.box[0] = std::clamp<int64_t>(cy - cut_h / 2, 0, height);
  draw.box[1] = std::clamp<int64_t>(cy + cut_h / 2, 0, height);
  draw.box[2] = std::clamp<int64_t>(cx - cut_w / 2, 0, width);
  draw.box[3] = std::clamp<int64_t>(cx + cut_w / 2, 0, width);
  draw.lam = 1.0 - static_cast<double>((draw.box[1] - draw.box[0]) * (draw.box[3] - draw.box[2])) /
                       static_cast<double>(height * width);
  return draw;
}

absl::Status CheckLabels(const std::vector<int32_t>& labels, int num_classes) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("MixUp/CutMix: label ", labels[i], " of the batch's sample ", i, " is outside 0..",
                       num_classes - 1, " (num_classes = ", num_classes, "); unlabelled samples cannot be mixed"));
    }
  }
  return absl::OkStatus();
}

void SoftTargets(const MixupOptions& o, const MixDraw& draw, const std::vector<int32_t>& labels, float* out) {
  // As timm's mixup_target in float32: one-hot rows of (on, off), each
  // scaled by its weight, then added.
  const size_t n = labels.size(), k = static_cast<size_t>(o.num_classes);
  const float off = static_cast<float>(o.label_smoothing / o.num_classes);
  const float on = static_cast<float>(1.0 - o.label_smoothing + o.label_smoothing / o.num_classes);
  const float self = static_cast<float>(draw.lam), other = static_cast<float>(1.0 - draw.lam);
  const float off_mixed = off * self + off * other;
  for (size_t i = 0; i < n; ++i) {
    float* row = out + i * k;
    std::fill(row, row + k, off_mixed);
    const size_t a = static_cast<size_t>(labels[i]), b = static_cast<size_t>(labels[n - 1 - i]);
    row[a] = on * self + (a == b ? on : off) * other;
    if (b != a) row[b] = off * self + on * other;
  }
}

}  // namespace stoker
