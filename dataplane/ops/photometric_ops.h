// Photometric ops with the semantics of torchvision's functional ops on uint8
// tensors (torchvision/transforms/functional_tensor.py): float32 arithmetic,
// clamped, truncated to uint8 unless noted. Pure functions on 8-bit RGB
// cv::Mat images (height x width x 3), in place; thread-safe. Registered as
// pipeline ops (op_registry.h) with a probability gate each.
#ifndef STOKER_DATAPLANE_OPS_PHOTOMETRIC_OPS_H_
#define STOKER_DATAPLANE_OPS_PHOTOMETRIC_OPS_H_

#include <opencv2/core.hpp>

namespace stoker {

// v >= threshold becomes 255 - v.
void Solarize(cv::Mat& image, float threshold);
// v & ~(2^(8 - bits) - 1): the top `bits` bits (0..8).
void Posterize(cv::Mat& image, int bits);
// Each channel's histogram equalised with torchvision's (and PIL's) lookup
// table: step = (pixels not in the last occupied bin) / 255, rounded down;
// lut[v] = (count below v + step / 2) / step.
void Equalize(cv::Mat& image);
// Each channel stretched linearly from its min..max to 0..255 (a flat
// channel is left as it is).
void Autocontrast(cv::Mat& image);
// Blend with the image smoothed by [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13
// (rounded; the one-pixel border kept): factor 0 smooths, 1 is the
// identity, 2 sharpens. Images with a side of 2 or less are unchanged.
void AdjustSharpness(cv::Mat& image, double factor);
void Invert(cv::Mat& image);
// Grayscale (transforms.h) in all three channels.
void GrayscaleInPlace(cv::Mat& image);
// A separable Gaussian of `kernel_size` taps (odd) and `sigma`, reflected
// borders (torch's "reflect", OpenCV's REFLECT_101), rounded half to even.
void GaussianBlur(cv::Mat& image, int kernel_size, double sigma);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_PHOTOMETRIC_OPS_H_
