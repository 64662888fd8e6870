#include "dataplane/ops/erasing_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "dataplane/ops/op_registry.h"

namespace stoker {

std::optional<CropBox> RandomErasingBox(int height, int width, double scale_min, double scale_max, double ratio_min,
                                        double ratio_max, Rng& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(ratio_min), log_hi = std::log(ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * rng.Uniform(scale_min, scale_max);
    const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(erase_area * aspect)));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    const int top = static_cast<int>(rng.UniformInt(0, height - h));
    const int left = static_cast<int>(rng.UniformInt(0, width - w));
    return CropBox{top, left, h, w};
  }
  return std::nullopt;
}

namespace {

// The ranges and defaults are declared (ErasingOps); the pairs' order, the
// value's count and its exclusion with value_random are checked here.
absl::Status CheckErasing(const std::string& where, v1::Op& op, OpShape*) {
  const auto& o = op.random_erasing();
  const std::string w = where + ".random_erasing";
  if (!(o.scale_min() > 0 && o.scale_min() <= o.scale_max() && o.scale_max() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.scale = %g:%g; need 0 < min <= max <= 1", w, o.scale_min(), o.scale_max()));
  }
  if (!(o.ratio_min() >= 0.01f && o.ratio_min() <= o.ratio_max() && o.ratio_max() <= 100)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.ratio = %g:%g; need 0.01 <= min <= max <= 100", w, o.ratio_min(), o.ratio_max()));
  }
  if (o.value_size() != 0 && o.value_size() != 1 && o.value_size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.value has %d values; give 1 or 3 (R:G:B)", w, o.value_size()));
  }
  if (o.value_random() && o.value_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(w, ": value and value_random exclude each other"));
  }
  return absl::OkStatus();
}

void ApplyErasing(const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext& context, GeometrySink*) {
  const auto& o = op.random_erasing();
  if (!PassesGate(true, o.p(), 1, rng)) return;
  const std::optional<CropBox> box =
      RandomErasingBox(image.rows, image.cols, o.scale_min(), o.scale_max(), o.ratio_min(), o.ratio_max(), rng);
  if (!box) return;
  cv::Mat region = image(cv::Rect(box->left, box->top, box->width, box->height));
  if (!o.value_random()) {
    cv::Scalar fill = cv::Scalar::all(0);
    for (int c = 0; c < 3; ++c) {
      if (o.value_size() > 0) fill[c] = std::nearbyint(o.value(o.value_size() == 3 ? c : 0));
    }
    region.setTo(fill);
    return;
  }
  // torchvision erases the normalised tensor with N(0, 1): in pixels,
  // 255 (mean + std z), rounded and clipped.
  const int width = region.cols * 3;
  std::vector<float> z(static_cast<size_t>(width));
  float offset[3], scale[3];
  for (int c = 0; c < 3; ++c) {
    offset[c] = static_cast<float>(255.0 * context.mean[c]) + 0.5f;  // + 0.5: rounding by truncation below
    scale[c] = static_cast<float>(255.0 * context.std[c]);
  }
  for (int y = 0; y < region.rows; ++y) {
    FillStandardNormal(rng, z.data(), z.size());
    uint8_t* p = region.ptr<uint8_t>(y);
    for (int x = 0; x < width; x += 3) {
      for (int c = 0; c < 3; ++c) {
        p[x + c] = static_cast<uint8_t>(std::clamp(offset[c] + scale[c] * z[static_cast<size_t>(x + c)], 0.0f, 255.0f));
      }
    }
  }
}

}  // namespace

const std::vector<OpEntry>& ErasingOps() {
  static const auto* ops = new std::vector<OpEntry>{
      WithParams({{"p", 0, 1, 0.5},
                  {"scale_min", 0, 1, 0.02, "", true},
                  {"scale_max", 0, 1, 0.33},
                  {"ratio_min", 0.01, 100, 0.3},
                  {"ratio_max", 0.01, 100, 3.3},
                  {"value", 0, 255}},
                 {v1::Op::kRandomErasing, "transforms.RandomErasing", CheckErasing, [](const v1::Op&) { return true; },
                  ApplyErasing}),
  };
  return *ops;
}

}  // namespace stoker
