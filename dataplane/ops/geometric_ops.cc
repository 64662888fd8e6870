#include "dataplane/ops/geometric_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <opencv2/imgproc.hpp>
#include "absl/strings/str_format.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/kernels/simd.h"
#include "dataplane/kernels/transforms.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"

namespace stoker {

float TorchLinspace(float start, float end, int steps, int i) {
  if (steps == 1) return start;
  const float step = (end - start) / static_cast<float>(steps - 1);
  return i < steps / 2 ? start + step * static_cast<float>(i) : end - step * static_cast<float>(steps - 1 - i);
}

std::array<double, 6> InverseAffineMatrix(double angle, double translate_x, double translate_y, double scale,
                                          double shear_x, double shear_y, double center_x, double center_y) {
  const double rot = angle * M_PI / 180, sx = shear_x * M_PI / 180, sy = shear_y * M_PI / 180;
  // Rotation, scale and shear: R(a) S(s) SHy(sy) SHx(sx), inverted (its
  // determinant without the scale is 1).
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  std::array<double, 6> m = {d / scale, -b / scale, 0, -c / scale, a / scale, 0};
  m[2] += m[0] * (-center_x - translate_x) + m[1] * (-center_y - translate_y);
  m[5] += m[3] * (-center_x - translate_x) + m[4] * (-center_y - translate_y);
  m[2] += center_x;
  m[5] += center_y;
  return m;
}

namespace {

// grid_sample(align_corners=False, padding_mode="zeros") at the input
// position (ix, iy) that SampleRow computed from the normalised grid
// position, with torchvision's fill: masked, the fill is blended in by the
// sampled coverage (value x coverage + (1 - coverage) x fill, as its
// _apply_grid_transform); nearest takes the fill outside.
inline void Sample(const cv::Mat& image, float ix, float iy, bool bilinear, const cv::Scalar& fill, bool masked,
                   uint8_t* out) {
  const int w = image.cols, h = image.rows;
  // Far outside (or not a number: a degenerate warp): nothing is read, and
  // no float that does not fit an int is converted.
  const bool near = ix > -2.0f && ix < static_cast<float>(w) + 1 && iy > -2.0f && iy < static_cast<float>(h) + 1;
  if (!bilinear) {
    const int x = near ? static_cast<int>(RoundHalfEven(ix)) : -1, y = near ? static_cast<int>(RoundHalfEven(iy)) : -1;
    if (x >= 0 && x < w && y >= 0 && y < h) {
      const uint8_t* p = image.ptr<uint8_t>(y) + x * 3;
      out[0] = p[0], out[1] = p[1], out[2] = p[2];
    } else {
      for (int c = 0; c < 3; ++c) out[c] = masked ? static_cast<uint8_t>(fill[c]) : 0;
    }
    return;
  }
  if (!near) {
    for (int c = 0; c < 3; ++c) out[c] = masked ? static_cast<uint8_t>(fill[c]) : 0;
    return;
  }
  const float x0 = std::floor(ix), y0 = std::floor(iy), x1 = x0 + 1, y1 = y0 + 1;
  const float weights[4] = {(x1 - ix) * (y1 - iy), (ix - x0) * (y1 - iy), (x1 - ix) * (iy - y0), (ix - x0) * (iy - y0)};
  const int xs[4] = {static_cast<int>(x0), static_cast<int>(x1), static_cast<int>(x0), static_cast<int>(x1)};
  const int ys[4] = {static_cast<int>(y0), static_cast<int>(y0), static_cast<int>(y1), static_cast<int>(y1)};
  float value[3] = {0, 0, 0}, coverage = 0;
  for (int k = 0; k < 4; ++k) {
    if (xs[k] < 0 || xs[k] >= w || ys[k] < 0 || ys[k] >= h) continue;
    const uint8_t* p = image.ptr<uint8_t>(ys[k]) + xs[k] * 3;
    for (int c = 0; c < 3; ++c) value[c] += static_cast<float>(p[c]) * weights[k];
    coverage += weights[k];
  }
  for (int c = 0; c < 3; ++c) {
    const float v = masked ? value[c] * coverage + (1.0f - coverage) * static_cast<float>(fill[c]) : value[c];
    out[c] = static_cast<uint8_t>(std::clamp(RoundHalfEven(v), 0.0f, 255.0f));
  }
}

// One output row's grid positions (gx, gy) to input positions, in float32
// step by step as torch computes them (a nearest pixel at a tie depends on
// it): a flat loop, vectorised (an AVX2 build chosen at run time; no fused
// multiply-add, so the same floats).
STOKER_AVX2_CLONES void GridToInput(float* __restrict gx, float* __restrict gy, int n, float w, float h) {
  for (int i = 0; i < n; ++i) {
    gx[i] = ((gx[i] + 1.0f) * w - 1.0f) / 2.0f;
    gy[i] = ((gy[i] + 1.0f) * h - 1.0f) / 2.0f;
  }
}

// The affine grid of one output row (torchvision's _gen_affine_grid).
STOKER_AVX2_CLONES void AffineGridRow(const float* __restrict xs, int n, float y, const float* __restrict r,
                                      float* __restrict gx, float* __restrict gy) {
  const float y1 = y * r[1], y4 = y * r[4];
  for (int i = 0; i < n; ++i) {
    gx[i] = xs[i] * r[0] + y1 + r[2];
    gy[i] = xs[i] * r[3] + y4 + r[5];
  }
}

// The perspective grid of one output row (torchvision's _perspective_grid):
// k as given, kw and kh the first six divided by half the width and height.
STOKER_AVX2_CLONES void PerspectiveGridRow(const float* __restrict xs, int n, float y, const float* __restrict k,
                                           const float* __restrict kw, float* __restrict gx, float* __restrict gy) {
  const float y7 = y * k[7], y1 = y * kw[1], y4 = y * kw[4];
  for (int i = 0; i < n; ++i) {
    const float den = xs[i] * k[6] + y7 + 1.0f;
    gx[i] = (xs[i] * kw[0] + y1 + kw[2]) / den - 1.0f;
    gy[i] = (xs[i] * kw[3] + y4 + kw[5]) / den - 1.0f;
  }
}

// Samples one output row from its grid positions.
void SampleRow(const cv::Mat& image, float* gx, float* gy, bool bilinear, const cv::Scalar& fill, bool masked,
               uint8_t* row) {
  GridToInput(gx, gy, image.cols, static_cast<float>(image.cols), static_cast<float>(image.rows));
  for (int i = 0; i < image.cols; ++i) Sample(image, gx[i], gy[i], bilinear, fill, masked, row + i * 3);
}

}  // namespace

cv::Mat WarpAffine(const cv::Mat& image, const std::array<double, 6>& m, bool bilinear, const cv::Scalar& fill,
                   bool masked) {
  const int w = image.cols, h = image.rows;
  // A translation by whole pixels (the policies' TranslateX/Y, truncated to
  // integers) samples every pixel at an integer position, to within float
  // error far below a rounding step: the output is the input shifted, with
  // the fill (masked) or 0 where nothing comes in. Copied, not sampled.
  const bool whole_fill = !masked || (fill[0] == std::trunc(fill[0]) && fill[1] == std::trunc(fill[1]) &&
                                      fill[2] == std::trunc(fill[2]));  // rounded and truncated alike
  if (m[0] == 1 && m[1] == 0 && m[3] == 0 && m[4] == 1 && m[2] == std::trunc(m[2]) && m[5] == std::trunc(m[5]) &&
      std::abs(m[2]) < w && std::abs(m[5]) < h && whole_fill) {
    const int dx = static_cast<int>(m[2]), dy = static_cast<int>(m[5]);  // output (x, y) reads input (x + dx, y + dy)
    cv::Mat out(h, w, CV_8UC3, masked ? fill : cv::Scalar::all(0));
    const cv::Rect from = cv::Rect(dx, dy, w, h) & cv::Rect(0, 0, w, h);
    if (from.area() > 0) image(from).copyTo(out(cv::Rect(from.x - dx, from.y - dy, from.width, from.height)));
    return out;
  }
  // torchvision's _gen_affine_grid in float32: theta^T / (w / 2, h / 2),
  // applied to the output pixels' centres relative to the image's.
  const float half_w = 0.5f * static_cast<float>(w), half_h = 0.5f * static_cast<float>(h);
  const float r[6] = {static_cast<float>(m[0]) / half_w, static_cast<float>(m[1]) / half_w,
                      static_cast<float>(m[2]) / half_w, static_cast<float>(m[3]) / half_h,
                      static_cast<float>(m[4]) / half_h, static_cast<float>(m[5]) / half_h};
  std::vector<float> xs(static_cast<size_t>(w));  // the columns' centres, once
  for (int i = 0; i < w; ++i) {
    xs[static_cast<size_t>(i)] =
        TorchLinspace(-static_cast<float>(w) * 0.5f + 0.5f, static_cast<float>(w) * 0.5f + 0.5f - 1, w, i);
  }
  cv::Mat out(h, w, CV_8UC3);
  std::vector<float> gx(static_cast<size_t>(w)), gy(static_cast<size_t>(w));
  for (int j = 0; j < h; ++j) {
    const float y = TorchLinspace(-static_cast<float>(h) * 0.5f + 0.5f, static_cast<float>(h) * 0.5f + 0.5f - 1, h, j);
    AffineGridRow(xs.data(), w, y, r, gx.data(), gy.data());
    SampleRow(image, gx.data(), gy.data(), bilinear, fill, masked, out.ptr<uint8_t>(j));
  }
  return out;
}

std::array<double, 8> PerspectiveCoefficients(const std::array<cv::Point2d, 4>& start,
                                              const std::array<cv::Point2d, 4>& end) {
  cv::Mat a(8, 8, CV_64F), b(8, 1, CV_64F), x;
  for (int i = 0; i < 4; ++i) {
    const cv::Point2d p1 = end[static_cast<size_t>(i)], p2 = start[static_cast<size_t>(i)];
    const double r0[8] = {p1.x, p1.y, 1, 0, 0, 0, -p2.x * p1.x, -p2.x * p1.y};
    const double r1[8] = {0, 0, 0, p1.x, p1.y, 1, -p2.y * p1.x, -p2.y * p1.y};
    for (int k = 0; k < 8; ++k) a.at<double>(2 * i, k) = r0[k], a.at<double>(2 * i + 1, k) = r1[k];
    b.at<double>(2 * i) = p2.x;
    b.at<double>(2 * i + 1) = p2.y;
  }
  cv::solve(a, b, x, cv::DECOMP_SVD);
  std::array<double, 8> c;
  for (int k = 0; k < 8; ++k) c[static_cast<size_t>(k)] = x.at<double>(k);
  return c;
}

cv::Mat WarpPerspective(const cv::Mat& image, const std::array<double, 8>& c, bool bilinear, const cv::Scalar& fill,
                        bool masked) {
  const int w = image.cols, h = image.rows;
  // torchvision's _perspective_grid in float32.
  const float half_w = 0.5f * static_cast<float>(w), half_h = 0.5f * static_cast<float>(h);
  float k[8];
  for (int i = 0; i < 8; ++i) k[i] = static_cast<float>(c[static_cast<size_t>(i)]);
  std::vector<float> xs(static_cast<size_t>(w));  // the columns' centres, once
  for (int i = 0; i < w; ++i)
    xs[static_cast<size_t>(i)] = TorchLinspace(0.5f, static_cast<float>(w) + 0.5f - 1.0f, w, i);
  const float kw[6] = {k[0] / half_w, k[1] / half_w, k[2] / half_w, k[3] / half_h, k[4] / half_h, k[5] / half_h};
  cv::Mat out(h, w, CV_8UC3);
  std::vector<float> gx(static_cast<size_t>(w)), gy(static_cast<size_t>(w));
  for (int j = 0; j < h; ++j) {
    const float y = TorchLinspace(0.5f, static_cast<float>(h) + 0.5f - 1.0f, h, j);
    PerspectiveGridRow(xs.data(), w, y, k, kw, gx.data(), gy.data());
    SampleRow(image, gx.data(), gy.data(), bilinear, fill, masked, out.ptr<uint8_t>(j));
  }
  return out;
}

GeometryStep AffineWarpStep(const std::array<double, 6>& m, int width, int height) {
  // input = M (output - c) + c, with c the image's centre.
  const double cx = 0.5 * width, cy = 0.5 * height;
  return GeometryStep::Warp({m[0], m[1], m[2] + cx - m[0] * cx - m[1] * cy,  //
                             m[3], m[4], m[5] + cy - m[3] * cx - m[4] * cy,  //
                             0, 0, 1},
                            width, height);
}

GeometryStep PerspectiveWarpStep(const std::array<double, 8>& c, int width, int height) {
  return GeometryStep::Warp({c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], 1}, width, height);
}

cv::Mat WarpAffineMoving(const cv::Mat& image, const std::array<double, 6>& m, bool bilinear, const cv::Scalar& fill,
                         bool masked, GeometrySink* geometry) {
  if (geometry != nullptr) geometry->Step(AffineWarpStep(m, image.cols, image.rows));
  return WarpAffine(image, m, bilinear, fill, masked);
}

std::array<int, 4> PaddingSides(const std::vector<int>& p) {
  if (p.size() == 1) return {p[0], p[0], p[0], p[0]};
  if (p.size() == 2) return {p[0], p[1], p[0], p[1]};
  if (p.size() == 4) return {p[0], p[1], p[2], p[3]};
  return {0, 0, 0, 0};
}

cv::Mat PadImage(const cv::Mat& image, int left, int top, int right, int bottom, int mode, const cv::Scalar& fill) {
  static const int kBorders[] = {cv::BORDER_CONSTANT, cv::BORDER_REPLICATE, cv::BORDER_REFLECT_101, cv::BORDER_REFLECT};
  cv::Mat out;
  cv::copyMakeBorder(image, out, top, bottom, left, right, kBorders[std::clamp(mode, 0, 3)], fill);
  return out;
}

cv::Size PaddedSize(const v1::Op& op, cv::Size size) {
  if (op.has_pad()) {
    const std::array<int, 4> p = PaddingSides(std::vector<int>(op.pad().padding().begin(), op.pad().padding().end()));
    return {size.width + p[0] + p[2], size.height + p[1] + p[3]};
  }
  if (op.has_random_crop()) {
    const auto& o = op.random_crop();
    const std::array<int, 4> p = PaddingSides(std::vector<int>(o.padding().begin(), o.padding().end()));
    return {std::max(size.width + p[0] + p[2], o.size()), std::max(size.height + p[1] + p[3], o.size())};
  }
  return size;
}

absl::Status LimitPaddedPixels(const v1::Op& op, cv::Size input, int64_t max_pixels) {
  const cv::Size padded = PaddedSize(op, input);
  const int64_t pixels = int64_t{padded.width} * padded.height;
  if (pixels > (max_pixels > 0 ? max_pixels : int64_t{1} << 28)) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat(PipelineToText({op}), " of ", input.width, "x", input.height, " would make ",
                                    padded.width, "x", padded.height, " pixels; --max-pixels is ", max_pixels));
  }
  return absl::OkStatus();
}

namespace {

cv::Scalar FillOf(const google::protobuf::RepeatedField<float>& fill) {
  return FillColour(fill).value_or(cv::Scalar::all(0));  // the transforms' default fill, 0
}

// The pairs' ranges (each end of a pair is declared with its pair's range,
// Ends), which their order check's message states too.
constexpr OpParam kDegrees{"degrees", -360, 360};
constexpr OpParam kScale{"scale", 0.01, 100};
constexpr OpParam kShear{"shear", -89, 89};

// The declarations of a pair's two fields NAME_min, NAME_max, in `range`.
OpParam End(const OpParam& range, const char* field) {
  OpParam p = range;
  p.field = field;
  return p;
}

// A pair lo:hi in order and in its declared `range` (compared as floats, as
// the fields are).
absl::Status CheckRange(const std::string& where, float lo, float hi, const OpParam& range) {
  const float min = static_cast<float>(range.lo), max = static_cast<float>(range.hi);
  if (!(lo >= min && lo <= hi && hi <= max)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s = %g:%g; need %g <= min <= max <= %g", where, lo, hi, min, max));
  }
  return absl::OkStatus();
}

absl::Status CheckPadding(const std::string& where, const google::protobuf::RepeatedField<int32_t>& padding) {
  if (padding.size() != 0 && padding.size() != 1 && padding.size() != 2 && padding.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.padding has %d values; give 1, 2 (left/right:top/bottom) or 4 (left:top:right:bottom)",
                        where, padding.size()));
  }
  return absl::OkStatus();  // each value's range is declared (kPadding)
}

std::vector<int> Ints(const google::protobuf::RepeatedField<int32_t>& r) {
  return std::vector<int>(r.begin(), r.end());
}

double Draw(float lo, float hi, Rng& rng) { return lo < hi ? rng.Uniform(lo, hi) : lo; }

// Crops and pads as geometry steps: a box in the input's coordinates (parts outside are padding).
void Step(GeometrySink* geometry, const GeometryStep& step) {
  if (geometry != nullptr) geometry->Step(step);
}

// The warps' own checks: the pairs' order, the translation, the fill's count and the interpolation.
absl::Status CheckRotate(const std::string& where, v1::Op& op, OpShape*) {
  const auto& o = op.rotate();
  const std::string w = where + ".rotate";
  if (auto s = CheckRange(w + ".degrees", o.degrees_min(), o.degrees_max(), kDegrees); !s.ok()) return s;
  if (auto s = CheckWarpInterpolation(w, o.has_interpolation(), o.interpolation()); !s.ok()) return s;
  return CheckFill(w, o.fill());
}

absl::Status CheckAffine(const std::string& where, v1::Op& op, OpShape*) {
  auto& o = *op.mutable_affine();
  const std::string w = where + ".affine";
  if (o.scale_min() == 0 && o.scale_max() == 0) o.set_scale_min(1), o.set_scale_max(1);
  if (auto s = CheckRange(w + ".degrees", o.degrees_min(), o.degrees_max(), kDegrees); !s.ok()) return s;
  if (auto s = CheckRange(w + ".scale", o.scale_min(), o.scale_max(), kScale); !s.ok()) return s;
  if (auto s = CheckRange(w + ".shear_x", o.shear_x_min(), o.shear_x_max(), kShear); !s.ok()) return s;
  if (auto s = CheckRange(w + ".shear_y", o.shear_y_min(), o.shear_y_max(), kShear); !s.ok()) return s;
  if (!(o.translate_x() >= 0 && o.translate_x() <= 1 && o.translate_y() >= 0 && o.translate_y() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.translate = %g, %g; each 0..1 of the side", w, o.translate_x(), o.translate_y()));
  }
  if (auto s = CheckWarpInterpolation(w, o.has_interpolation(), o.interpolation()); !s.ok()) return s;
  return CheckFill(w, o.fill());
}

absl::Status CheckPerspective(const std::string& where, v1::Op& op, OpShape*) {
  const auto& o = op.perspective();
  const std::string w = where + ".perspective";
  if (auto s = CheckWarpInterpolation(w, o.has_interpolation(), o.interpolation()); !s.ok()) return s;
  return CheckFill(w, o.fill());
}

}  // namespace

const std::vector<OpEntry>& GeometricOps() {
  // The declared ranges (OpParam); the pairs' order, the counts of fill and
  // padding and the warps' interpolation are checked by the entries.
  const OpParam kPadding{"padding", 0, kMaxImageSide};
  static const auto* ops = new std::vector<OpEntry>{
      WithParams({End(kDegrees, "degrees_min"), End(kDegrees, "degrees_max"), kFillParam, kGateParam},
                 {v1::Op::kRotate, "transforms.RandomRotation / F.rotate", CheckRotate,
                  [](const v1::Op& op) {
                    const auto& o = op.rotate();
                    return IsGated(o) || o.degrees_min() < o.degrees_max();
                  },
                  [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
                    const auto& o = op.rotate();
                    if (!PassesGate(o.has_p(), o.p(), 1, rng)) return;
                    const double angle = Draw(o.degrees_min(), o.degrees_max(), rng);
                    const bool bilinear = o.has_interpolation() && o.interpolation() == v1::BILINEAR;
                    image = WarpAffineMoving(image, InverseAffineMatrix(-angle, 0, 0, 1, 0, 0), bilinear,
                                             FillOf(o.fill()), true, geometry);
                  },
                  OpTargets::kMoved}),
      WithParams({End(kDegrees, "degrees_min"),
                  End(kDegrees, "degrees_max"),
                  {"translate_x", 0, 1},
                  {"translate_y", 0, 1},
                  End(kScale, "scale_min"),
                  End(kScale, "scale_max"),
                  End(kShear, "shear_x_min"),
                  End(kShear, "shear_x_max"),
                  End(kShear, "shear_y_min"),
                  End(kShear, "shear_y_max"),
                  kFillParam,
                  kGateParam},
                 {v1::Op::kAffine, "transforms.RandomAffine", CheckAffine,
                  [](const v1::Op& op) {
                    const auto& o = op.affine();
                    return IsGated(o) || o.degrees_min() < o.degrees_max() || o.translate_x() > 0 ||
                           o.translate_y() > 0 || o.scale_min() < o.scale_max() || o.shear_x_min() < o.shear_x_max() ||
                           o.shear_y_min() < o.shear_y_max();
                  },
                  [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
                    const auto& o = op.affine();
                    if (!PassesGate(o.has_p(), o.p(), 1, rng)) return;
                    const double angle = Draw(o.degrees_min(), o.degrees_max(), rng);
                    double tx = 0, ty = 0;
                    if (o.translate_x() > 0 || o.translate_y() > 0) {
                      const double dx = o.translate_x() * image.cols, dy = o.translate_y() * image.rows;
                      tx = std::nearbyint(rng.Uniform(-dx, dx));
                      ty = std::nearbyint(rng.Uniform(-dy, dy));
                    }
                    const double scale = Draw(o.scale_min(), o.scale_max(), rng);
                    const double shear_x = Draw(o.shear_x_min(), o.shear_x_max(), rng);
                    const double shear_y = Draw(o.shear_y_min(), o.shear_y_max(), rng);
                    const bool bilinear = o.has_interpolation() && o.interpolation() == v1::BILINEAR;
                    image = WarpAffineMoving(image, InverseAffineMatrix(angle, tx, ty, scale, shear_x, shear_y),
                                             bilinear, FillOf(o.fill()), true, geometry);
                  },
                  OpTargets::kMoved}),
      WithParams({{"distortion_scale", 0, 1, 0.5}, kFillParam, {"p", 0, 1, 0.5}},
                 {v1::Op::kPerspective, "transforms.RandomPerspective", CheckPerspective,
                  [](const v1::Op& op) { return true; },
                  [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
                    const auto& o = op.perspective();
                    if (!PassesGate(true, o.p(), 1, rng)) return;
                    const int w = image.cols, h = image.rows;
                    const int dw = static_cast<int>(o.distortion_scale() * (w / 2)),
                              dh = static_cast<int>(o.distortion_scale() * (h / 2));
                    auto pick = [&](int lo, int hi) {
                      return static_cast<double>(rng.UniformInt(lo, hi));
                    };  // [lo, hi]
                    std::array<cv::Point2d, 4> end;
                    end[0] = {pick(0, dw), pick(0, dh)};
                    end[1] = {pick(w - dw - 1, w - 1), pick(0, dh)};
                    end[2] = {pick(w - dw - 1, w - 1), pick(h - dh - 1, h - 1)};
                    end[3] = {pick(0, dw), pick(h - dh - 1, h - 1)};
                    const std::array<cv::Point2d, 4> start = {cv::Point2d(0, 0), cv::Point2d(w - 1, 0),
                                                              cv::Point2d(w - 1, h - 1), cv::Point2d(0, h - 1)};
                    const bool bilinear = !o.has_interpolation() || o.interpolation() == v1::BILINEAR;
                    const std::array<double, 8> coefficients = PerspectiveCoefficients(start, end);
                    if (geometry != nullptr) geometry->Step(PerspectiveWarpStep(coefficients, w, h));
                    image = WarpPerspective(image, coefficients, bilinear, FillOf(o.fill()));
                  },
                  OpTargets::kMoved}),
      WithParams({kPadding, kFillParam},
                 {v1::Op::kPad, "transforms.Pad / F.pad",
                  [](const std::string& where, v1::Op& op, OpShape* shape) {
                    const auto& o = op.pad();
                    if (o.padding().empty()) {
                      return absl::InvalidArgumentError(
                          absl::StrCat(where, ".pad has no padding; give 1, 2 or 4 values"));
                    }
                    if (auto s = CheckPadding(where + ".pad", o.padding()); !s.ok()) return s;
                    shape->fixed = false;  // the size now depends on the input
                    return CheckFill(where + ".pad", o.fill());
                  },
                  [](const v1::Op&) { return false; },
                  [](const v1::Op& op, cv::Mat& image, Rng&, const OpContext&, GeometrySink* geometry) {
                    const auto& o = op.pad();
                    const std::array<int, 4> p = PaddingSides(Ints(o.padding()));
                    Step(geometry, GeometryStep::Pad({-p[1], -p[0], image.rows + p[1] + p[3], image.cols + p[0] + p[2]},
                                                     o.padding_mode()));
                    image = PadImage(image, p[0], p[1], p[2], p[3], o.padding_mode(), FillOf(o.fill()));
                  },
                  OpTargets::kMoved}),
      WithParams({{"size", 1, kMaxImageSide, kNoDefault, "pixels"}, kPadding, kFillParam},
                 SetsSize({v1::Op::kRandomCrop, "transforms.RandomCrop",
                           [](const std::string& where, v1::Op& op, OpShape* shape) {
                             const auto& o = op.random_crop();
                             if (auto s = CheckPadding(where + ".random_crop", o.padding()); !s.ok()) return s;
                             shape->fixed = true;
                             shape->height = shape->width = o.size();
                             return CheckFill(where + ".random_crop", o.fill());
                           },
                           [](const v1::Op&) { return true; },
                           [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
                             const auto& o = op.random_crop();
                             std::array<int, 4> p = PaddingSides(Ints(o.padding()));
                             const int size = o.size();
                             // Then up to size (pad_if_needed, or always: torchvision raises there).
                             const int grow_w = std::max(0, size - (image.cols + p[0] + p[2]));
                             const int grow_h = std::max(0, size - (image.rows + p[1] + p[3]));
                             p[0] += grow_w, p[2] += grow_w, p[1] += grow_h, p[3] += grow_h;
                             if (p[0] || p[1] || p[2] || p[3]) {
                               Step(geometry, GeometryStep::Pad(
                                                  {-p[1], -p[0], image.rows + p[1] + p[3], image.cols + p[0] + p[2]},
                                                  o.padding_mode()));
                               image = PadImage(image, p[0], p[1], p[2], p[3], o.padding_mode(), FillOf(o.fill()));
                             }
                             int top = 0, left = 0;
                             if (image.rows != size || image.cols != size) {
                               top = static_cast<int>(rng.UniformInt(0, image.rows - size));
                               left = static_cast<int>(rng.UniformInt(0, image.cols - size));
                             }
                             Step(geometry, GeometryStep::Crop({top, left, size, size}));
                             image = image(cv::Rect(left, top, size, size)).clone();
                           },
                           OpTargets::kMoved})),
      WithParams({kGateParam},
                 {v1::Op::kVerticalFlip, "F.vflip / transforms.RandomVerticalFlip", nullptr,
                  [](const v1::Op& op) { return IsGated(op.vertical_flip()); },
                  [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
                    if (!PassesGate(op.vertical_flip().has_p(), op.vertical_flip().p(), 1, rng)) return;
                    cv::flip(image, image, 0);
                    Step(geometry, GeometryStep::FlipVertical(image.cols, image.rows));
                  },
                  OpTargets::kMoved}),
  };
  return *ops;
}

}  // namespace stoker
