// What the geometric ops did to an image, as one description every target of
// the sample follows: boxes, keypoints and masks move with the pixels through
// the same steps (torchvision transforms.v2's idea; Albumentations'
// DualTransform). A geometric op appends its steps to the sample's
// GeometryLog as it transforms the image (pipeline.h); SampleTargets then
// replays them. Value types; thread-compatible. Pure functions.
#ifndef STOKER_DATAPLANE_SAMPLE_GEOMETRY_H_
#define STOKER_DATAPLANE_SAMPLE_GEOMETRY_H_

#include <array>
#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/status/status.h"
#include "dataplane/base/crop_box.h"

namespace stoker {

// One step, in the coordinates of its input (pixel edges: a W-wide image
// spans x in [0, W]).
struct GeometryStep {
  enum class Kind {
    kCrop,            // the box is the output; parts outside the input are padding (see `padding_mode`)
    kResize,          // scaled to width x height
    kFlipHorizontal,  // x -> W - x
    kFlipVertical,    // y -> H - y
    kWarp,            // a projective warp to the same size (rotate, affine, perspective, the policies' shears)
  };
  Kind kind = Kind::kCrop;
  CropBox box;                // kCrop
  int width = 0, height = 0;  // the size after the step
  // kCrop: boxes whose centre falls outside the crop are dropped too
  // (random_iou_crop, as torchvision's RandomIoUCrop).
  bool drop_outside_centers = false;
  // kWarp: the 3x3 map (row-major, homogeneous) from an output position to
  // the input position its pixel is sampled at, both in pixel-edge
  // coordinates; the targets move by its inverse.
  std::array<double, 9> inverse_map = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  // kCrop: how masks are padded where the box leaves the input, a
  // stoker.v1.PaddingMode: 0 zeros (constant), 1 edge, 2 reflect,
  // 3 symmetric; the image's mode, as Albumentations and torchvision v2 pad
  // a mask (the image's fill colour is not a class: constant pads with 0).
  int padding_mode = 0;

  static GeometryStep Crop(const CropBox& box) { return {Kind::kCrop, box, box.width, box.height, false}; }
  static GeometryStep Pad(const CropBox& box, int padding_mode) {
    GeometryStep s = Crop(box);
    s.padding_mode = padding_mode;
    return s;
  }
  static GeometryStep Resize(int width, int height) { return {Kind::kResize, {}, width, height, false}; }
  static GeometryStep FlipHorizontal(int width, int height) {
    return {Kind::kFlipHorizontal, {}, width, height, false};
  }
  static GeometryStep FlipVertical(int width, int height) { return {Kind::kFlipVertical, {}, width, height, false}; }
  static GeometryStep Warp(const std::array<double, 9>& inverse_map, int width, int height) {
    GeometryStep s{Kind::kWarp, {}, width, height, false};
    s.inverse_map = inverse_map;
    return s;
  }
};

// The steps one sample's image went through, from its decoded size.
struct GeometryLog {
  int width = 0, height = 0;  // the decoded image's size (before any step)
  std::vector<GeometryStep> steps;
  void Add(const GeometryStep& step) { steps.push_back(step); }
};

// A sample's targets (fields of kind boxes, classes of an annotated source,
// keypoints, mask, masks) in the pixel coordinates of its image. Boxes are
// xyxy; box i owns labels[i], crowd[i], instance_masks[i] (when there are
// instance masks) and keypoints [i * points_per_box, (i + 1) *
// points_per_box) (when there are keypoints).
struct SampleTargets {
  std::vector<float> boxes;     // 4 per box: x1, y1, x2, y2
  std::vector<int32_t> labels;  // one per box
  std::vector<int32_t> crowd;   // one per box (0 or 1)
  int points_per_box = 0;
  std::vector<float> keypoints;         // 3 per point: x, y, visibility (0: not labelled, 1: hidden, 2: visible)
  cv::Mat mask;                         // CV_8U per-pixel classes, the image's size (empty: none)
  std::vector<cv::Mat> instance_masks;  // CV_8U 0/1, one per box, the image's size (empty: none)
  // The image size the annotations were made for (0: not known); the
  // decoded image must have it, or its boxes would land elsewhere.
  int source_width = 0, source_height = 0;

  int64_t num_boxes() const { return static_cast<int64_t>(boxes.size() / 4); }
};

// Bytes of masks (instance masks and the mask) one sample may hold at any
// step; a step that would make more fails the sample as too_large.
inline constexpr int64_t kMaxTargetMaskBytes = int64_t{256} << 20;

// How boxes are kept after a crop: a box whose visible area is below
// `min_visibility` of its area before the crop (or that has no area left)
// is dropped with its label, crowd flag, keypoints and instance mask.
struct TargetOptions {
  double min_visibility = 0;
};

// Replays `log` on `targets`. Masks must have the decoded image's size
// (log.width x log.height): INVALID_ARGUMENT with kBadField otherwise.
// Boxes are clipped to each crop and scaled by each resize exactly as the
// pixels are (the output pixel edge at u maps to the input edge at
// u * in / out); masks are cut and resized with nearest neighbour (OpenCV's
// INTER_NEAREST: source index floor(u * in / out)) and padded in the step's
// padding_mode (zeros for a plain crop); points
// outside the output lose their visibility (0). A warp maps each box's
// corners and takes the box around them (torchvision v2's rule), clipped to
// the image and kept as after a crop; points follow the forward map; masks
// are sampled at the output pixels' centres with nearest neighbour, 0
// outside (a pixel whose position is not finite reads 0 as well).
absl::Status ApplyGeometry(const GeometryLog& log, const TargetOptions& options, SampleTargets* targets);

// ApplyGeometry's parts: masks of the image's size (else kBadField), and
// one step from an input of in_width x in_height.
absl::Status CheckTargetsFit(int width, int height, const SampleTargets& targets);
// kBadField: the annotations were made for another size than width x height.
absl::Status CheckSourceSize(int width, int height, const SampleTargets& targets);
void ApplyStep(const GeometryStep& step, int in_width, int in_height, const TargetOptions& options,
               SampleTargets* targets);

// Where a pipeline's geometric ops send their steps while they run: the
// targets move at once (an op such as random_iou_crop looks at the boxes
// where they are now), and the log keeps the description (for tests and
// reports). Either may be null. Thread-compatible; one per sample.
struct GeometrySink {
  SampleTargets* targets = nullptr;
  GeometryLog* log = nullptr;
  TargetOptions options;
  int width = 0, height = 0;  // the image's size now
  // Not OK once a step would have made more than kMaxTargetMaskBytes of
  // masks (too_large); later steps are then skipped.
  absl::Status status;

  // The decoded image's size; kBadField when a mask does not have it.
  absl::Status Start(int w, int h) {
    width = w;
    height = h;
    if (log != nullptr) {
      log->width = w;
      log->height = h;
    }
    if (targets == nullptr) return absl::OkStatus();
    if (targets->source_width > 0 && (targets->source_width != w || targets->source_height != h)) {
      return CheckSourceSize(w, h, *targets);
    }
    return CheckTargetsFit(w, h, *targets);
  }
  void Step(const GeometryStep& step);
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SAMPLE_GEOMETRY_H_
