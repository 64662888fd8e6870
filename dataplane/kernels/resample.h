// Resizing as torchvision does it since 0.17 (antialias=True, the default),
// which reproduces PIL's resample: when shrinking, the filter (triangle for
// bilinear, Keys' cubic with a = -0.5 for bicubic) is widened by the scale,
// so every input pixel contributes and no detail aliases. Separable: a
// horizontal pass, then a vertical one, each in 22-bit fixed point rounded to
// uint8, as PIL's 8-bit path (the sums in AVX2 where the CPU has it, in
// plain C++ elsewhere; integer arithmetic, the same bytes). OpenCV offers no such filter (INTER_AREA is a
// box; INTER_LINEAR samples four pixels whatever the scale), hence this file.
// Enlarging, or antialias off, is OpenCV's cv::resize (the bytes of before).
// Pure functions; thread-safe.
#ifndef STOKER_DATAPLANE_KERNELS_RESAMPLE_H_
#define STOKER_DATAPLANE_KERNELS_RESAMPLE_H_

#include <opencv2/core.hpp>

namespace stoker {

// `image` (8-bit, 1 or 3 channels) resized to `size`. `interpolation` is a
// stoker.v1.Interpolation value (0 bilinear, 1 nearest, 2 bicubic); nearest
// never antialiases (as torchvision).
cv::Mat Resample(const cv::Mat& image, cv::Size size, int interpolation, bool antialias);

// Tests: false makes Resample use its plain C++ sums instead of the AVX2 ones
// (which it uses where the CPU has them); both give the same bytes.
void SetResampleSimdForTesting(bool enabled);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_KERNELS_RESAMPLE_H_
