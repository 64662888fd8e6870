#include "dataplane/sample/geometry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"

namespace stoker {
namespace {

// The part of `m` inside `box`, padded where the box leaves it: zeros, or
// (padding_mode 1..3, with part of `m` inside the box) the edge, reflect or
// symmetric border the image was padded with (PadImage's OpenCV borders).
cv::Mat CropWithPadding(const cv::Mat& m, const CropBox& box, int padding_mode) {
  const cv::Rect inside = cv::Rect(box.left, box.top, box.width, box.height) & cv::Rect(0, 0, m.cols, m.rows);
  if (padding_mode != 0 && inside.area() > 0) {
    static const int kBorders[] = {cv::BORDER_CONSTANT, cv::BORDER_REPLICATE, cv::BORDER_REFLECT_101,
                                   cv::BORDER_REFLECT};
    const int top = inside.y - box.top, left = inside.x - box.left;
    const int bottom = box.top + box.height - (inside.y + inside.height);
    const int right = box.left + box.width - (inside.x + inside.width);
    cv::Mat out;
    cv::copyMakeBorder(m(inside), out, top, bottom, left, right, kBorders[std::clamp(padding_mode, 0, 3)],
                       cv::Scalar::all(0));
    return out;
  }
  cv::Mat out = cv::Mat::zeros(box.height, box.width, m.type());
  if (inside.area() > 0) {
    m(inside).copyTo(out(cv::Rect(inside.x - box.left, inside.y - box.top, inside.width, inside.height)));
  }
  return out;
}

// A double as float without the undefined cast of a finite value past
// float's range: such values saturate (infinities and NaN stay as they are).
float ToFloat(double v) {
  constexpr double kMax = std::numeric_limits<float>::max();
  return static_cast<float>(std::isfinite(v) ? std::clamp(v, -kMax, kMax) : v);
}

double Area(const float* b) { return std::max(0.0f, b[2] - b[0]) * static_cast<double>(std::max(0.0f, b[3] - b[1])); }

// Keeps the boxes for which keep[i] holds, with everything they own.
void KeepBoxes(const std::vector<bool>& keep, SampleTargets* t) {
  size_t out = 0;
  const size_t n = keep.size();
  const size_t p = static_cast<size_t>(t->points_per_box);
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    std::copy_n(t->boxes.begin() + static_cast<std::ptrdiff_t>(4 * i), 4,
                t->boxes.begin() + static_cast<std::ptrdiff_t>(4 * out));
    if (i < t->labels.size()) t->labels[out] = t->labels[i];
    if (i < t->crowd.size()) t->crowd[out] = t->crowd[i];
    if (i < t->instance_masks.size()) t->instance_masks[out] = t->instance_masks[i];
    if (p > 0) {
      std::copy_n(t->keypoints.begin() + static_cast<std::ptrdiff_t>(3 * p * i), 3 * p,
                  t->keypoints.begin() + static_cast<std::ptrdiff_t>(3 * p * out));
    }
    ++out;
  }
  t->boxes.resize(4 * out);
  if (t->labels.size() > out) t->labels.resize(out);
  if (t->crowd.size() > out) t->crowd.resize(out);
  if (t->instance_masks.size() > out) t->instance_masks.resize(out);
  if (p > 0) t->keypoints.resize(3 * p * out);
}

// Clips box `b` to [0, width] x [0, height]; false when it must be dropped
// (no area left, or less than min_visibility of its area before).
bool ClipAndKeep(float* b, float width, float height, const TargetOptions& options) {
  const double before = Area(b);
  b[0] = std::clamp(b[0], 0.0f, width);
  b[2] = std::clamp(b[2], 0.0f, width);
  b[1] = std::clamp(b[1], 0.0f, height);
  b[3] = std::clamp(b[3], 0.0f, height);
  const double after = Area(b);
  return !(after <= 0 || (before > 0 && after < options.min_visibility * before));
}

void Crop(const CropBox& box, bool drop_outside_centers, int padding_mode, const TargetOptions& options,
          SampleTargets* t) {
  const int64_t n = t->num_boxes();
  std::vector<bool> keep(static_cast<size_t>(n), true);
  bool dropped = false;
  for (int64_t i = 0; i < n; ++i) {
    float* b = &t->boxes[static_cast<size_t>(4 * i)];
    if (drop_outside_centers) {  // in double, as random_iou_crop chose the crop
      const double cx = 0.5 * (static_cast<double>(b[0]) + b[2]), cy = 0.5 * (static_cast<double>(b[1]) + b[3]);
      if (!(cx > box.left && cx < box.left + box.width && cy > box.top && cy < box.top + box.height)) {
        keep[static_cast<size_t>(i)] = false;
        dropped = true;
      }
    }
    b[0] -= static_cast<float>(box.left), b[2] -= static_cast<float>(box.left);
    b[1] -= static_cast<float>(box.top), b[3] -= static_cast<float>(box.top);
    if (!ClipAndKeep(b, static_cast<float>(box.width), static_cast<float>(box.height), options)) {
      keep[static_cast<size_t>(i)] = false;
      dropped = true;
    }
  }
  for (size_t k = 0; k + 2 < t->keypoints.size(); k += 3) {
    float* kp = &t->keypoints[k];
    kp[0] -= static_cast<float>(box.left);
    kp[1] -= static_cast<float>(box.top);
    // Pixel edges: a point on the far edge (x = W, where a flip puts x = 0) is inside.
    if (kp[0] < 0 || kp[1] < 0 || kp[0] > static_cast<float>(box.width) || kp[1] > static_cast<float>(box.height)) {
      kp[2] = 0;
    }
  }
  if (!t->mask.empty()) t->mask = CropWithPadding(t->mask, box, padding_mode);
  for (cv::Mat& m : t->instance_masks) m = CropWithPadding(m, box, padding_mode);
  if (dropped) KeepBoxes(keep, t);
}

void Resize(int in_w, int in_h, int out_w, int out_h, SampleTargets* t) {
  const double sx = static_cast<double>(out_w) / in_w, sy = static_cast<double>(out_h) / in_h;
  for (size_t k = 0; k + 4 <= t->boxes.size(); k += 4) {
    t->boxes[k] = ToFloat(t->boxes[k] * sx);
    t->boxes[k + 1] = ToFloat(t->boxes[k + 1] * sy);
    t->boxes[k + 2] = ToFloat(t->boxes[k + 2] * sx);
    t->boxes[k + 3] = ToFloat(t->boxes[k + 3] * sy);
  }
  for (size_t k = 0; k + 2 < t->keypoints.size(); k += 3) {
    t->keypoints[k] = ToFloat(t->keypoints[k] * sx);
    t->keypoints[k + 1] = ToFloat(t->keypoints[k + 1] * sy);
  }
  auto resize = [&](cv::Mat& m) {
    if (m.cols == out_w && m.rows == out_h) return;
    cv::Mat out;
    cv::resize(m, out, cv::Size(out_w, out_h), 0, 0, cv::INTER_NEAREST);
    m = out;
  };
  if (!t->mask.empty()) resize(t->mask);
  for (cv::Mat& m : t->instance_masks) resize(m);
}

void Flip(bool horizontal, int w, int h, SampleTargets* t) {
  const float extent = static_cast<float>(horizontal ? w : h);
  const size_t a = horizontal ? 0 : 1;  // x or y
  for (size_t k = 0; k + 4 <= t->boxes.size(); k += 4) {
    const float lo = t->boxes[k + a], hi = t->boxes[k + a + 2];
    t->boxes[k + a] = extent - hi;
    t->boxes[k + a + 2] = extent - lo;
  }
  for (size_t k = 0; k + 2 < t->keypoints.size(); k += 3) t->keypoints[k + a] = extent - t->keypoints[k + a];
  const int code = horizontal ? 1 : 0;
  if (!t->mask.empty()) cv::flip(t->mask, t->mask, code);
  for (cv::Mat& m : t->instance_masks) cv::flip(m, m, code);
}

// The 3x3 inverse of `m` (row-major); false when it is singular or not finite.
bool Invert3x3(const std::array<double, 9>& m, std::array<double, 9>* out) {
  const double a = m[0], b = m[1], c = m[2], d = m[3], e = m[4], f = m[5], g = m[6], h = m[7], i = m[8];
  const double A = e * i - f * h, B = -(d * i - f * g), C = d * h - e * g;
  const double det = a * A + b * B + c * C;
  if (!std::isfinite(det) || std::abs(det) < 1e-12) return false;
  *out = {A / det, -(b * i - c * h) / det, (b * f - c * e) / det,
          B / det, (a * i - c * g) / det,  -(a * f - c * d) / det,
          C / det, -(a * h - b * g) / det, (a * e - b * d) / det};
  return true;
}

// `m` applied to (x, y); false when the point goes to infinity or behind.
bool MapPoint(const std::array<double, 9>& m, double x, double y, double* u, double* v) {
  const double w = m[6] * x + m[7] * y + m[8];
  if (!(w > 1e-12)) return false;
  *u = (m[0] * x + m[1] * y + m[2]) / w;
  *v = (m[3] * x + m[4] * y + m[5]) / w;
  return std::isfinite(*u) && std::isfinite(*v);
}

// For each output pixel of a warp (row-major), the input pixel (row x
// in_width + column) its centre maps to with nearest neighbour, or -1 when
// that is outside the input: computed once, then applied to every mask.
std::vector<int64_t> WarpSources(const std::array<double, 9>& inverse, int width, int height, int in_width,
                                 int in_height) {
  std::vector<int64_t> sources(static_cast<size_t>(width) * height, -1);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      double u = 0, v = 0;
      if (!MapPoint(inverse, x + 0.5, y + 0.5, &u, &v)) continue;
      if (u >= 0 && v >= 0 && u < in_width && v < in_height) {
        sources[static_cast<size_t>(y) * width + x] = int64_t{static_cast<int>(v)} * in_width + static_cast<int>(u);
      }
    }
  }
  return sources;
}

// A one-channel (continuous) mask through WarpSources' map, 0 outside.
cv::Mat WarpMask(const cv::Mat& m, const std::vector<int64_t>& sources, int width, int height) {
  cv::Mat out = cv::Mat::zeros(height, width, m.type());
  const cv::Mat in = m.isContinuous() ? m : m.clone();
  const uint8_t* src = in.ptr<uint8_t>(0);
  uint8_t* dst = out.ptr<uint8_t>(0);
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i] >= 0) dst[i] = src[sources[i]];
  }
  return out;
}

void Warp(const GeometryStep& step, const TargetOptions& options, SampleTargets* t) {
  const float width = static_cast<float>(step.width), height = static_cast<float>(step.height);
  std::array<double, 9> forward{};
  const bool invertible = Invert3x3(step.inverse_map, &forward);
  const int64_t n = t->num_boxes();
  std::vector<bool> keep(static_cast<size_t>(n), true);
  bool dropped = false;
  for (int64_t i = 0; i < n; ++i) {
    float* b = &t->boxes[static_cast<size_t>(4 * i)];
    double lo_x = HUGE_VAL, lo_y = HUGE_VAL, hi_x = -HUGE_VAL, hi_y = -HUGE_VAL;
    bool mapped = invertible;
    for (int k = 0; k < 4 && mapped; ++k) {
      double u = 0, v = 0;
      mapped = MapPoint(forward, b[(k == 1 || k == 2) ? 2 : 0], b[k < 2 ? 1 : 3], &u, &v);
      lo_x = std::min(lo_x, u), hi_x = std::max(hi_x, u), lo_y = std::min(lo_y, v), hi_y = std::max(hi_y, v);
    }
    if (!mapped) {
      std::fill(b, b + 4, 0.0f);
      keep[static_cast<size_t>(i)] = false;
      dropped = true;
      continue;
    }
    b[0] = ToFloat(lo_x), b[1] = ToFloat(lo_y);
    b[2] = ToFloat(hi_x), b[3] = ToFloat(hi_y);
    if (!ClipAndKeep(b, width, height, options)) {
      keep[static_cast<size_t>(i)] = false;
      dropped = true;
    }
  }
  for (size_t k = 0; k + 2 < t->keypoints.size(); k += 3) {
    float* kp = &t->keypoints[k];
    double u = 0, v = 0;
    if (!invertible || !MapPoint(forward, kp[0], kp[1], &u, &v)) {
      kp[2] = 0;
      continue;
    }
    kp[0] = ToFloat(u);
    kp[1] = ToFloat(v);
    if (kp[0] < 0 || kp[1] < 0 || kp[0] > width || kp[1] > height) kp[2] = 0;
  }
  if (dropped) KeepBoxes(keep, t);  // the dropped boxes' masks are not warped
  const cv::Mat& any = t->mask.empty() ? (t->instance_masks.empty() ? cv::Mat() : t->instance_masks[0]) : t->mask;
  if (any.empty()) return;
  // Masks have their image's size (CheckTargetsFit): one map serves all.
  const std::vector<int64_t> sources = WarpSources(step.inverse_map, step.width, step.height, any.cols, any.rows);
  if (!t->mask.empty()) t->mask = WarpMask(t->mask, sources, step.width, step.height);
  for (cv::Mat& m : t->instance_masks) m = WarpMask(m, sources, step.width, step.height);
}

}  // namespace

absl::Status CheckTargetsFit(int width, int height, const SampleTargets& targets) {
  auto check = [&](const cv::Mat& m, const char* what) -> absl::Status {
    if (m.empty() || (m.cols == width && m.rows == height)) return absl::OkStatus();
    return DecodeError(DecodeFailure::kBadField, absl::StrCat(what, " of ", m.cols, "x", m.rows,
                                                              " does not match its image of ", width, "x", height));
  };
  if (absl::Status s = check(targets.mask, "a mask"); !s.ok()) return s;
  for (const cv::Mat& m : targets.instance_masks) {
    if (absl::Status s = check(m, "an instance mask"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void ApplyStep(const GeometryStep& step, int in_width, int in_height, const TargetOptions& options,
               SampleTargets* targets) {
  switch (step.kind) {
    case GeometryStep::Kind::kCrop:
      Crop(step.box, step.drop_outside_centers, step.padding_mode, options, targets);
      break;
    case GeometryStep::Kind::kResize: Resize(in_width, in_height, step.width, step.height, targets); break;
    case GeometryStep::Kind::kFlipHorizontal:
    case GeometryStep::Kind::kFlipVertical:
      Flip(step.kind == GeometryStep::Kind::kFlipHorizontal, in_width, in_height, targets);
      break;
    case GeometryStep::Kind::kWarp: Warp(step, options, targets); break;
  }
}

absl::Status ApplyGeometry(const GeometryLog& log, const TargetOptions& options, SampleTargets* targets) {
  if (absl::Status s = CheckTargetsFit(log.width, log.height, *targets); !s.ok()) return s;
  int w = log.width, h = log.height;
  for (const GeometryStep& step : log.steps) {
    ApplyStep(step, w, h, options, targets);
    w = step.width;
    h = step.height;
  }
  return absl::OkStatus();
}

absl::Status CheckSourceSize(int width, int height, const SampleTargets& targets) {
  return DecodeError(DecodeFailure::kBadField,
                     absl::StrCat("the annotations are for an image of ", targets.source_width, "x",
                                  targets.source_height, "; the image decodes to ", width, "x", height));
}

void GeometrySink::Step(const GeometryStep& step) {
  if (log != nullptr) log->Add(step);
  if (targets != nullptr && status.ok()) {
    const int64_t masks = static_cast<int64_t>(targets->instance_masks.size()) + (targets->mask.empty() ? 0 : 1);
    if (masks * step.width * step.height > kMaxTargetMaskBytes) {
      status =
          DecodeError(DecodeFailure::kTooLarge, absl::StrCat(masks, " masks of ", step.width, "x", step.height,
                                                             " would take more than ", kMaxTargetMaskBytes, " bytes"));
    } else {
      ApplyStep(step, width, height, options, targets);
    }
  }
  width = step.width;
  height = step.height;
}

}  // namespace stoker
