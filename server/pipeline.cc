#include "server/pipeline.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/transforms.h"

namespace stoker {
namespace {

absl::Status CheckSide(const std::string& field, int value) {
  if (value < 1 || value > kMaxImageSide) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " = ", value, "; allowed range is 1..", kMaxImageSide, " pixels"));
  }
  return absl::OkStatus();
}

// Fills defaults and validates one op. `fixed` tells whether the output size
// is fixed after this op.
absl::Status CheckOp(const std::string& where, v1::Op& op, bool& fixed, int& h, int& w) {
  switch (op.op_case()) {
    case v1::Op::kRandomResizedCrop: {
      auto& o = *op.mutable_random_resized_crop();
      if (o.scale_min() == 0) o.set_scale_min(0.08f);
      if (o.scale_max() == 0) o.set_scale_max(1.0f);
      if (o.ratio_min() == 0) o.set_ratio_min(3.0f / 4.0f);
      if (o.ratio_max() == 0) o.set_ratio_max(4.0f / 3.0f);
      if (auto s = CheckSide(where + ".random_resized_crop.size", o.size()); !s.ok()) return s;
      if (!(o.scale_min() > 0 && o.scale_min() <= o.scale_max() && o.scale_max() <= 1)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s.random_resized_crop.scale = %g:%g; need 0 < min <= max <= 1", where, o.scale_min(),
            o.scale_max()));
      }
      if (!(o.ratio_min() > 0 && o.ratio_min() <= o.ratio_max() && o.ratio_max() < 1e6)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s.random_resized_crop.ratio = %g:%g; need 0 < min <= max", where, o.ratio_min(),
            o.ratio_max()));
      }
      fixed = true;
      h = w = o.size();
      return absl::OkStatus();
    }
    case v1::Op::kCenterCrop:
      if (auto s = CheckSide(where + ".center_crop.size", op.center_crop().size()); !s.ok()) return s;
      fixed = true;
      h = w = op.center_crop().size();
      return absl::OkStatus();
    case v1::Op::kResize:
      fixed = false;
      return CheckSide(where + ".resize.shorter_side", op.resize().shorter_side());
    case v1::Op::kRandomHorizontalFlip: {
      const float p = op.random_horizontal_flip().p();
      if (!(p >= 0 && p <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s.random_horizontal_flip.p = %g; allowed range is 0..1", where, p));
      }
      return absl::OkStatus();
    }
    case v1::Op::OP_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(where, " has no op set"));
}

}  // namespace

absl::StatusOr<Pipeline> Pipeline::Create(const v1::SessionConfig& config) {
  if (config.batch_size() < 1 || config.batch_size() > kMaxBatchSize) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size = ", config.batch_size(),
                                                   "; allowed range is 1..", kMaxBatchSize));
  }
  if (config.dtype() != v1::DTYPE_UNSPECIFIED && config.dtype() != v1::UINT8) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype = ", config.dtype(), "; supported: UINT8 (normalize on the GPU in the client)"));
  }
  if (!v1::Layout_IsValid(config.layout())) {
    return absl::InvalidArgumentError(absl::StrCat("layout = ", config.layout(), "; supported: NHWC, NCHW"));
  }
  if (config.pipeline().empty()) {
    return absl::InvalidArgumentError("pipeline is empty; it must end in a fixed size (add center_crop or random_resized_crop)");
  }
  Pipeline p;
  p.layout_ = config.layout() == v1::NCHW ? v1::NCHW : v1::NHWC;
  bool fixed = false;
  for (int i = 0; i < config.pipeline_size(); ++i) {
    v1::Op op = config.pipeline(i);
    if (auto s = CheckOp(absl::StrCat("pipeline[", i, "]"), op, fixed, p.out_height_, p.out_width_);
        !s.ok()) {
      return s;
    }
    p.ops_.push_back(std::move(op));
  }
  if (!fixed) {
    return absl::InvalidArgumentError(
        "pipeline output size is not fixed, so samples cannot be batched: add center_crop(size) or "
        "random_resized_crop(size) after the last resize");
  }
  return p;
}

std::vector<int64_t> Pipeline::SampleShape() const {
  if (layout_ == v1::NCHW) return {3, out_height_, out_width_};
  return {out_height_, out_width_, 3};
}

cv::Mat Pipeline::Apply(cv::Mat image, Rng& rng) const {
  for (const v1::Op& op : ops_) {
    switch (op.op_case()) {
      case v1::Op::kRandomResizedCrop: {
        const auto& o = op.random_resized_crop();
        const CropBox box = RandomResizedCropBox(image.rows, image.cols, o.scale_min(), o.scale_max(),
                                                 o.ratio_min(), o.ratio_max(), rng);
        image = ResizedCrop(image, box, o.size());
        break;
      }
      case v1::Op::kCenterCrop:
        image = CenterCrop(image, op.center_crop().size());
        break;
      case v1::Op::kResize:
        image = ResizeShorterSide(image, op.resize().shorter_side());
        break;
      case v1::Op::kRandomHorizontalFlip:
        // Always draw, so later ops see the same stream whatever the outcome.
        if (rng.UniformDouble() < op.random_horizontal_flip().p()) FlipHorizontalInPlace(image);
        break;
      case v1::Op::OP_NOT_SET:
        break;
    }
  }
  return image;
}

void Pipeline::Store(const cv::Mat& image, uint8_t* dst) const {
  const int h = out_height_, w = out_width_;
  if (layout_ == v1::NHWC) {
    for (int y = 0; y < h; ++y) std::memcpy(dst + int64_t{y} * w * 3, image.ptr<uint8_t>(y), size_t(w) * 3);
    return;
  }
  const int64_t plane = int64_t{h} * w;
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = image.ptr<uint8_t>(y);
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) dst[c * plane + int64_t{y} * w + x] = row[x * 3 + c];
    }
  }
}

}  // namespace stoker
