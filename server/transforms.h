// Image transforms with torchvision's parameter semantics, as pure functions
// on 8-bit RGB cv::Mat images (height x width x 3). Thread-safe; inputs are
// not modified unless the name says so.
#ifndef STOKER_SERVER_TRANSFORMS_H_
#define STOKER_SERVER_TRANSFORMS_H_

#include "common/rng.h"
#include <opencv2/core.hpp>

namespace stoker {

// A box in image coordinates: top row, left column, height, width.
struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width;
  }
};

// torchvision RandomResizedCrop.get_params: up to 10 tries of a random area
// fraction in [scale_min, scale_max] and a log-uniform aspect ratio in
// [ratio_min, ratio_max]; if none fits, the central box clamped to the ratio
// range.
CropBox RandomResizedCropBox(int height, int width, double scale_min, double scale_max,
                             double ratio_min, double ratio_max, Rng& rng);

// The box cut out (bilinear) and resized to size x size.
cv::Mat ResizedCrop(const cv::Mat& image, const CropBox& box, int size);

// torchvision CenterCrop: the central size x size box, top/left rounded as
// int(round((H - size) / 2)); a smaller image is zero-padded evenly first
// (left/top get the smaller half).
cv::Mat CenterCrop(const cv::Mat& image, int size);

// torchvision Resize(int): shorter side becomes `shorter_side` (bilinear), the
// longer one int(shorter_side * long / short).
cv::Mat ResizeShorterSide(const cv::Mat& image, int shorter_side);

// Mirrors left-right in place.
void FlipHorizontalInPlace(cv::Mat& image);

}  // namespace stoker

#endif  // STOKER_SERVER_TRANSFORMS_H_
