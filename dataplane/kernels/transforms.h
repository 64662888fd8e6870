// Image transforms with torchvision's parameter semantics, as pure functions
// on 8-bit RGB cv::Mat images (height x width x 3). Thread-safe; inputs are
// not modified unless the name says so.
#ifndef STOKER_DATAPLANE_KERNELS_TRANSFORMS_H_
#define STOKER_DATAPLANE_KERNELS_TRANSFORMS_H_

#include <opencv2/core.hpp>
#include "common/rng.h"
#include "dataplane/base/crop_box.h"

namespace stoker {

// std::nearbyint for |v| < 2^22 in the default rounding mode (to nearest,
// ties to even), inline so that loops around it vectorise: adding and taking
// away 1.5 x 2^23 leaves v rounded to an integer (IEEE arithmetic: the
// compiler may not fold it away without -ffast-math, which this project
// never uses).
inline float RoundHalfEven(float v) {
  constexpr float kMagic = 12582912.0f;
  return (v + kMagic) - kMagic;
}

// torchvision RandomResizedCrop.get_params: up to 10 tries of a random area
// fraction in [scale_min, scale_max] and a log-uniform aspect ratio in
// [ratio_min, ratio_max]; if none fits, the central box clamped to the ratio
// range.
CropBox RandomResizedCropBox(int height, int width, double scale_min, double scale_max, double ratio_min,
                             double ratio_max, Rng& rng);

// OpenCV interpolation flags for stoker.v1.Interpolation values
// (0 bilinear, 1 nearest, 2 bicubic).
int InterpolationFlag(int interpolation);

// The box cut out and resized to size x size (antialiased when shrinking
// if asked: resample.h).
cv::Mat ResizedCrop(const cv::Mat& image, const CropBox& box, int size, int interpolation = 0, bool antialias = false);

// torchvision CenterCrop's box for an image at least size x size:
// top = int(round((H - size) / 2)), left likewise (round half to even).
CropBox CenterCropBox(int height, int width, int size);

// torchvision CenterCrop: the central size x size box, top/left rounded as
// int(round((H - size) / 2)); a smaller image is zero-padded evenly first
// (left/top get the smaller half).
cv::Mat CenterCrop(const cv::Mat& image, int size);
// CenterCrop's box in the image's own coordinates: with negative or
// overreaching edges where a smaller image is padded.
CropBox CenterCropRegion(int height, int width, int size);

// torchvision Resize(int): shorter side becomes `shorter_side`, the longer
// one int(shorter_side * long / short), computed from height x width.
cv::Size ShorterSideSize(int height, int width, int shorter_side);
cv::Mat ResizeShorterSide(const cv::Mat& image, int shorter_side, int interpolation = 0, bool antialias = false);

// ColorJitter's four adjustments on uint8 RGB, as torchvision's tensor
// functions: blend(a, b, f) = clamp(f * a + (1 - f) * b) truncated to uint8.
void AdjustBrightness(cv::Mat& image, double factor);
void AdjustContrast(cv::Mat& image, double factor);
void AdjustSaturation(cv::Mat& image, double factor);
// Shifts hue by `shift` of a full turn (-0.5..0.5).
void AdjustHue(cv::Mat& image, double shift);
// torchvision rgb_to_grayscale on uint8: 0.2989 R + 0.587 G + 0.114 B, truncated.
cv::Mat Grayscale(const cv::Mat& image);

// Mirrors left-right in place.
void FlipHorizontalInPlace(cv::Mat& image);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_KERNELS_TRANSFORMS_H_
