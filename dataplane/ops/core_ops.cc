// The first ops Stoker had, as registered ops (op_registry.h): the crops and
// resizes that set an image's size (random_resized_crop, center_crop, resize,
// resize_pad), the flips, color_jitter, normalize (which Pipeline::Store
// applies with the dtype conversion) and the detection crop random_iou_crop.
// Their behaviour is pinned by pipeline_test.cc and the torchvision parity
// tests; core_ops_test.cc checks the table itself.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/kernels/resample.h"
#include "dataplane/kernels/transforms.h"
#include "dataplane/ops/detection_ops.h"
#include "dataplane/ops/op_registry.h"

namespace stoker {
namespace {

// The DCT scale, in eighths, for shrinking a crop to an output: the smallest
// of 1/8, 2/8, 4/8 such that `crop` x M / 8 still covers `out` pixels (the
// resize after it never enlarges), else 8/8: shrinking starts when the crop
// is at least twice the output. Always 8/8 for an antialiased resize.
int DctScaleFor(int crop, int out, bool antialias) {
  // libjpeg-turbo has SIMD inverse DCTs for 8/8, 4/8, 2/8 and 1/8 only; the
  // other M/8 use slow C code that costs more than the pixels they save
  // (measured with callgrind on the standard photo set).
  //
  // Not with antialias: a scaled IDCT is not the widened filter, and it put
  // 3-5 % of the pixels more than 2 levels from PIL's antialiased resample
  // even where 4x of the shrink was left to the filter (measured on the
  // photo set; python/tests/test_antialias.py holds the bound).
  if (antialias) return 8;
  for (int m : {1, 2, 4}) {
    if (int64_t{crop} * m >= int64_t{8} * out) return m;
  }
  return 8;
}

void ApplyColorJitter(const v1::ColorJitter& o, cv::Mat& image, Rng& rng) {
  // A random order of the four adjustments, then their factors in a fixed
  // order, as torchvision's ColorJitter.get_params.
  int order[4] = {0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(order[i], order[rng.UniformInt(0, i)]);
  auto factor = [&](float x) { return rng.Uniform(std::max(0.0, 1.0 - x), 1.0 + x); };
  const double b = o.brightness() > 0 ? factor(o.brightness()) : 1;
  const double c = o.contrast() > 0 ? factor(o.contrast()) : 1;
  const double s = o.saturation() > 0 ? factor(o.saturation()) : 1;
  const double h = o.hue() > 0 ? rng.Uniform(-o.hue(), o.hue()) : 0;
  for (int fn : order) {
    if (fn == 0 && o.brightness() > 0) AdjustBrightness(image, b);
    if (fn == 1 && o.contrast() > 0) AdjustContrast(image, c);
    if (fn == 2 && o.saturation() > 0) AdjustSaturation(image, s);
    if (fn == 3 && o.hue() > 0) AdjustHue(image, h);
  }
}

void Step(GeometrySink* geometry, const GeometryStep& s) {
  if (geometry != nullptr) geometry->Step(s);
}

void SetSquare(OpShape* shape, int size) {
  shape->fixed = true;
  shape->height = shape->width = size;
}

bool Always(const v1::Op&) { return true; }
bool Never(const v1::Op&) { return false; }

// random_resized_crop(size, scale, ratio, interpolation, antialias): its
// ranges and defaults are declared (CoreOps), the order within each range
// checked here.
absl::Status CheckRandomResizedCrop(const std::string& where, v1::Op& op, OpShape* shape) {
  const auto& o = op.random_resized_crop();
  if (!(o.scale_min() > 0 && o.scale_min() <= o.scale_max() && o.scale_max() <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.random_resized_crop.scale = %g:%g; need 0 < min <= max <= 1",
                                                      where, o.scale_min(), o.scale_max()));
  }
  if (!(o.ratio_min() >= 0.01f && o.ratio_min() <= o.ratio_max() && o.ratio_max() <= 100)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.random_resized_crop.ratio = %g:%g; need 0.01 <= min <= max <= 100", where, o.ratio_min(), o.ratio_max()));
  }
  SetSquare(shape, o.size());
  return absl::OkStatus();
}

void ApplyRandomResizedCrop(const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
  const auto& o = op.random_resized_crop();
  const CropBox box =
      RandomResizedCropBox(image.rows, image.cols, o.scale_min(), o.scale_max(), o.ratio_min(), o.ratio_max(), rng);
  image = ResizedCrop(image, box, o.size(), o.interpolation(), o.antialias());
  Step(geometry, GeometryStep::Crop(box));
  Step(geometry, GeometryStep::Resize(o.size(), o.size()));
}

absl::Status CheckCenterCrop(const std::string& where, v1::Op& op, OpShape* shape) {
  SetSquare(shape, op.center_crop().size());
  return absl::OkStatus();
}

void ApplyCenterCrop(const v1::Op& op, cv::Mat& image, Rng&, const OpContext&, GeometrySink* geometry) {
  Step(geometry, GeometryStep::Crop(CenterCropRegion(image.rows, image.cols, op.center_crop().size())));
  image = CenterCrop(image, op.center_crop().size());
}

// resize(shorter_side): the output size depends on the input's.
absl::Status CheckResize(const std::string& where, v1::Op& op, OpShape* shape) {
  shape->fixed = false;
  return absl::OkStatus();
}

// The pixels resize(shorter_side) makes of the input, against the limit
// (0: INT32_MAX).
absl::Status LimitResize(const v1::Op& op, cv::Size input, int64_t max_pixels) {
  const int64_t height = input.height, width = input.width, shorter_side = op.resize().shorter_side();
  const int64_t s = std::min(height, width), l = std::max(height, width);
  if (s <= 0) return absl::OkStatus();
  const double long_side = static_cast<double>(shorter_side) * static_cast<double>(l) / static_cast<double>(s);
  const double pixels = long_side * static_cast<double>(shorter_side);
  const double limit = max_pixels > 0 ? static_cast<double>(max_pixels) : static_cast<double>(INT32_MAX);
  if (pixels > limit) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat("resize(", shorter_side, ") of ", width, "x", height, " would make ",
                                    static_cast<int64_t>(pixels), " pixels; --max-pixels is ", max_pixels));
  }
  return absl::OkStatus();
}

void ApplyResize(const v1::Op& op, cv::Mat& image, Rng&, const OpContext&, GeometrySink* geometry) {
  image = ResizeShorterSide(image, op.resize().shorter_side(), op.resize().interpolation(), op.resize().antialias());
  Step(geometry, GeometryStep::Resize(image.cols, image.rows));
}

// The flips always draw, so later ops see the same stream whatever the outcome.
void ApplyHorizontalFlip(const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
  if (rng.UniformDouble() < op.random_horizontal_flip().p()) {
    FlipHorizontalInPlace(image);
    Step(geometry, GeometryStep::FlipHorizontal(image.cols, image.rows));
  }
}

void ApplyVerticalFlip(const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
  if (rng.UniformDouble() < op.random_vertical_flip().p()) {
    cv::flip(image, image, 0);
    Step(geometry, GeometryStep::FlipVertical(image.cols, image.rows));
  }
}

absl::Status CheckColorJitter(const std::string& where, v1::Op& op, OpShape*) {
  const auto& o = op.color_jitter();
  if (!(o.brightness() >= 0 && o.contrast() >= 0 && o.saturation() >= 0 && o.hue() >= 0 && o.hue() <= 0.5f)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.color_jitter = (brightness %g, contrast %g, saturation %g, hue %g); need factors >= 0 and hue in 0..0.5",
        where, o.brightness(), o.contrast(), o.saturation(), o.hue()));
  }
  return absl::OkStatus();
}

void ApplyColorJitterOp(const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
  ApplyColorJitter(op.color_jitter(), image, rng);
}

absl::Status CheckNormalize(const std::string& where, v1::Op& op, OpShape*) {
  const auto& o = op.normalize();
  if (o.mean_size() != 3 || o.std_size() != 3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.normalize has %d mean and %d std values; need 3 of each (R, G, B)", where, o.mean_size(), o.std_size()));
  }
  for (float v : o.std()) {
    if (!(v > 0)) return absl::InvalidArgumentError(absl::StrFormat("%s.normalize.std has %g; need > 0", where, v));
  }
  return absl::OkStatus();
}

// Pipeline::Store normalises, with the dtype conversion.
void ApplyNormalize(const v1::Op&, cv::Mat&, Rng&, const OpContext&, GeometrySink*) {}

absl::Status CheckResizePad(const std::string& where, v1::Op& op, OpShape* shape) {
  SetSquare(shape, op.resize_pad().size());
  return absl::OkStatus();
}

// Letterbox: the longer side scaled to `size`, then zeros below and right.
void ApplyResizePad(const v1::Op& op, cv::Mat& image, Rng&, const OpContext&, GeometrySink* geometry) {
  const auto& o = op.resize_pad();
  const cv::Size scaled = ResizePadSize(image.rows, image.cols, o.size());
  if (scaled != image.size()) {
    image = Resample(image, scaled, o.interpolation(), o.antialias());
    Step(geometry, GeometryStep::Resize(scaled.width, scaled.height));
  }
  cv::Mat padded = cv::Mat::zeros(o.size(), o.size(), image.type());
  image.copyTo(padded(cv::Rect(0, 0, image.cols, image.rows)));
  image = padded;
  Step(geometry, GeometryStep::Crop(CropBox{0, 0, o.size(), o.size()}));
}

absl::Status CheckIouCrop(const std::string& where, v1::Op& op, OpShape* shape) {
  shape->fixed = false;
  v1::RandomIoUCrop& o = *op.mutable_random_iou_crop();
  if (o.sampler_options().empty()) {
    for (float v : {0.0f, 0.1f, 0.3f, 0.5f, 0.7f, 0.9f, 1.0f}) o.add_sampler_options(v);
  }
  if (!(o.min_scale() > 0 && o.min_scale() <= o.max_scale() && o.max_scale() <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.random_iou_crop.scale = %g:%g; need 0 < min <= max <= 1",
                                                      where, o.min_scale(), o.max_scale()));
  }
  if (!(o.min_aspect_ratio() > 0 && o.min_aspect_ratio() <= o.max_aspect_ratio() && o.max_aspect_ratio() <= 100)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.random_iou_crop.aspect_ratio = %g:%g; need 0 < min <= max <= 100", where,
                        o.min_aspect_ratio(), o.max_aspect_ratio()));
  }
  if (o.sampler_options_size() > 32) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".random_iou_crop has ", o.sampler_options_size(), " sampler options; at most 32"));
  }
  for (float v : o.sampler_options()) {
    if (!(v >= 0 && v <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s.random_iou_crop.sampler_options has %g; each in 0..1 (1: no crop)", where, v));
    }
  }
  return absl::OkStatus();
}

// Crops by the sample's boxes (none without targets: then no option but 1 fits).
void ApplyIouCrop(const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
  static const std::vector<float> kNoBoxes;
  const std::vector<float>& boxes =
      geometry != nullptr && geometry->targets != nullptr ? geometry->targets->boxes : kNoBoxes;
  const std::optional<CropBox> box = RandomIouCropBox(op.random_iou_crop(), image.rows, image.cols, boxes, rng);
  if (box) {
    image = image(cv::Rect(box->left, box->top, box->width, box->height)).clone();
    GeometryStep crop = GeometryStep::Crop(*box);
    crop.drop_outside_centers = true;
    Step(geometry, crop);
  }
}

// The first ops' text form: their own argument names and order.
OpText FirstOpsText(std::vector<OpText::Argument> arguments, int bare) {
  return OpText{std::move(arguments), bare, /*first_ops_style=*/true};
}

// The first ops fused with decoding (OpEntry::fused): random_resized_crop
// and center_crop decode only their box; random_resized_crop and resize
// decode shrunk in the DCT domain when the region is at least twice the size
// they resize to, then resize what was decoded.
bool PlanRandomResizedCrop(const v1::Op& op, int height, int width, Rng& rng, CropBox* region, int* scale) {
  const auto& o = op.random_resized_crop();
  *region = RandomResizedCropBox(height, width, o.scale_min(), o.scale_max(), o.ratio_min(), o.ratio_max(), rng);
  *scale = DctScaleFor(std::min(region->height, region->width), o.size(), o.antialias());
  return true;
}

absl::Status FinishRandomResizedCrop(const v1::Op& op, cv::Size original, int64_t max_pixels, cv::Mat& image,
                                     GeometrySink* geometry) {
  const auto& o = op.random_resized_crop();
  image = Resample(image, cv::Size(o.size(), o.size()), o.interpolation(), o.antialias());
  if (geometry != nullptr) geometry->Step(GeometryStep::Resize(o.size(), o.size()));
  return absl::OkStatus();
}

// An image smaller than the crop is padded by `apply`, not fused.
bool PlanCenterCrop(const v1::Op& op, int height, int width, Rng& rng, CropBox* region, int* scale) {
  const int size = op.center_crop().size();
  if (height < size || width < size) return false;
  *region = CenterCropBox(height, width, size);
  return true;
}

bool PlanResize(const v1::Op& op, int height, int width, Rng& rng, CropBox* region, int* scale) {
  *scale = DctScaleFor(std::min(height, width), op.resize().shorter_side(), op.resize().antialias());
  return true;
}

// The target size comes from the original dimensions, not the scaled ones.
absl::Status FinishResize(const v1::Op& op, cv::Size original, int64_t max_pixels, cv::Mat& image,
                          GeometrySink* geometry) {
  if (absl::Status s = LimitResize(op, original, max_pixels); !s.ok()) return s;
  const cv::Size target = ShorterSideSize(original.height, original.width, op.resize().shorter_side());
  if (target != image.size()) image = Resample(image, target, op.resize().interpolation(), op.resize().antialias());
  if (geometry != nullptr) geometry->Step(GeometryStep::Resize(target.width, target.height));
  return absl::OkStatus();
}

// The estimates of a stored prefix's pixels (the longer side taken as 4/3
// of the shorter).
int64_t CenterCropPixels(const v1::Op& op, int64_t) {
  return int64_t{op.center_crop().size()} * op.center_crop().size();
}
int64_t ResizePixels(const v1::Op& op, int64_t) {
  return int64_t{op.resize().shorter_side()} * op.resize().shorter_side() * 4 / 3;
}

}  // namespace

const std::vector<OpEntry>& CoreOps() {
  constexpr OpTargets kMoved = OpTargets::kMoved, kUntouched = OpTargets::kUntouched;
  const OpText::Argument interpolation{"interpolation", "interpolation"}, antialias{"antialias", "antialias"};
  const OpParam antialias_on{"antialias", 0, 1, 1};
  auto side = [](const char* field) { return OpParam{field, 1, kMaxImageSide, kNoDefault, "pixels"}; };
  static const auto* ops = new std::vector<OpEntry>{
      WithParams({side("size"),
                  {"scale_min", 0, 1, 0.08, "", true},
                  {"scale_max", 0, 1, 1},
                  {"ratio_min", 0.01, 100, 3.0 / 4},
                  {"ratio_max", 0.01, 100, 4.0 / 3},
                  antialias_on},
                 SetsSize({v1::Op::kRandomResizedCrop,
                           "transforms.RandomResizedCrop",
                           CheckRandomResizedCrop,
                           Always,
                           ApplyRandomResizedCrop,
                           kMoved,
                           nullptr,
                           FirstOpsText({{"size", "size"},
                                         {"scale", "scale_min", "scale_max"},
                                         {"ratio", "ratio_min", "ratio_max"},
                                         interpolation,
                                         antialias},
                                        1),
                           {PlanRandomResizedCrop, FinishRandomResizedCrop, /*region=*/true}})),
      WithParams({side("size")}, Storable(CenterCropPixels, SetsSize({v1::Op::kCenterCrop,
                                                                      "transforms.CenterCrop",
                                                                      CheckCenterCrop,
                                                                      Never,
                                                                      ApplyCenterCrop,
                                                                      kMoved,
                                                                      nullptr,
                                                                      FirstOpsText({{"size", "size"}}, 1),
                                                                      {PlanCenterCrop, nullptr, /*region=*/true}}))),
      WithParams({side("shorter_side"), antialias_on},
                 Storable(ResizePixels, {v1::Op::kResize,
                                         "transforms.Resize (int size: the shorter side)",
                                         CheckResize,
                                         Never,
                                         ApplyResize,
                                         kMoved,
                                         LimitResize,
                                         FirstOpsText({{"size", "shorter_side"}, interpolation, antialias}, 1),
                                         {PlanResize, FinishResize}})),
      WithParams({kGateParam}, {v1::Op::kRandomHorizontalFlip, "transforms.RandomHorizontalFlip", nullptr, Always,
                                ApplyHorizontalFlip, kMoved, nullptr, FirstOpsText({{"p", "p"}}, 1)}),
      WithParams({kGateParam}, {v1::Op::kRandomVerticalFlip, "transforms.RandomVerticalFlip", nullptr, Always,
                                ApplyVerticalFlip, kMoved, nullptr, FirstOpsText({{"p", "p"}}, 1)}),
      WithParams(
          {{"hue", 0, 0.5}},
          {v1::Op::kColorJitter, "transforms.ColorJitter", CheckColorJitter, Always, ApplyColorJitterOp, kUntouched,
           nullptr,
           FirstOpsText(
               {{"brightness", "brightness"}, {"contrast", "contrast"}, {"saturation", "saturation"}, {"hue", "hue"}},
               4)}),
      OnlyLast(NeedsFloat("or send uint8 and normalize on the GPU",
                          {v1::Op::kNormalize, "transforms.Normalize (on the client's device)", CheckNormalize, Never,
                           ApplyNormalize, kUntouched, nullptr, FirstOpsText({{"mean", "mean"}, {"std", "std"}}, 0)})),
      WithParams(
          {side("size"), antialias_on},
          SetsSize({v1::Op::kResizePad, "none (letterbox: Resize of the longer side + Pad)", CheckResizePad, Never,
                    ApplyResizePad, kMoved, nullptr, FirstOpsText({{"size", "size"}, interpolation, antialias}, 1)})),
      WithParams({{"min_scale", 0, 1, 0.3, "", true},
                  {"max_scale", 0, 1, 1},
                  {"min_aspect_ratio", 0, 100, 0.5, "", true},
                  {"max_aspect_ratio", 0, 100, 2},
                  {"trials", 1, 1000, 40},
                  {"sampler_options", 0, 1}},
                 NeedsBoxes("chooses its crop by the boxes",
                            {v1::Op::kRandomIouCrop, "transforms.v2.RandomIoUCrop", CheckIouCrop, Always, ApplyIouCrop,
                             kMoved, nullptr,
                             FirstOpsText({{"scale", "min_scale", "max_scale"},
                                           {"aspect_ratio", "min_aspect_ratio", "max_aspect_ratio"},
                                           {"options", "sampler_options"},
                                           {"trials", "trials"}},
                                          0)})),
  };
  return *ops;
}

}  // namespace stoker
