// Geometric ops with torchvision's semantics: rotation, affine and
// perspective warps sampled as its tensor path samples them
// (torch.nn.functional.grid_sample with align_corners=False, zeros outside,
// then the fill blended in by a sampled mask, rounded), padding and the
// CIFAR-style random crop. Pure functions on 8-bit RGB cv::Mat images;
// thread-safe. Registered as pipeline ops (op_registry.h).
#ifndef STOKER_DATAPLANE_OPS_GEOMETRIC_OPS_H_
#define STOKER_DATAPLANE_OPS_GEOMETRIC_OPS_H_

#include <array>
#include <vector>

#include <opencv2/core.hpp>

#include "dataplane/sample/geometry.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// torchvision's _get_inverse_affine_matrix(center (0, 0), angle, translate,
// scale, shear) for the tensor path: maps an output position (relative to
// the image centre) to the input position it samples.
// `center_x`, `center_y`: the centre of rotation relative to the image's
// centre (torchvision's center argument minus half the size).
std::array<double, 6> InverseAffineMatrix(double angle, double translate_x, double translate_y, double scale,
                                          double shear_x, double shear_y, double center_x = 0, double center_y = 0);

// Samples `image` through `matrix` (InverseAffineMatrix's form) into an
// image of the same size. `bilinear` or nearest (round half to even).
// `masked`: torchvision with a fill (its transforms' default, fill=0): the
// fill blended in by the sampled coverage; unmasked: fill=None, zeros
// outside and no blending (the functional ops' and the policies' default).
cv::Mat WarpAffine(const cv::Mat& image, const std::array<double, 6>& matrix, bool bilinear, const cv::Scalar& fill,
                   bool masked = true);

// The coefficients (a..h) that map an output position to its input,
// (a x + b y + c) / (g x + h y + 1) and (d x + e y + f) / (g x + h y + 1),
// for the corners `start` (in the input) moved to `end` (in the output);
// each corner is (x, y): top-left, top-right, bottom-right, bottom-left.
std::array<double, 8> PerspectiveCoefficients(const std::array<cv::Point2d, 4>& start,
                                              const std::array<cv::Point2d, 4>& end);
cv::Mat WarpPerspective(const cv::Mat& image, const std::array<double, 8>& coefficients, bool bilinear,
                        const cv::Scalar& fill, bool masked = true);

// The warps as geometry steps (geometry.h) for an image of width x height,
// so that the sample's targets move with the pixels: the same maps in
// pixel-edge coordinates (WarpAffine's is relative to the image's centre;
// WarpPerspective's already maps edges to edges).
GeometryStep AffineWarpStep(const std::array<double, 6>& matrix, int width, int height);
GeometryStep PerspectiveWarpStep(const std::array<double, 8>& coefficients, int width, int height);

// WarpAffine that also reports its step to `geometry` (may be null).
cv::Mat WarpAffineMoving(const cv::Mat& image, const std::array<double, 6>& matrix, bool bilinear,
                         const cv::Scalar& fill, bool masked, GeometrySink* geometry);

// torch.linspace(start, end, steps)[i] in float32 (its two-sided formula:
// from the start for the first half, from the end for the rest), which both
// torchvision's sampling grids and its policies' magnitude bins use.
float TorchLinspace(float start, float end, int steps, int i);

// Padding (left, top, right, bottom) in a stoker.v1.PaddingMode.
cv::Mat PadImage(const cv::Mat& image, int left, int top, int right, int bottom, int mode, const cv::Scalar& fill);
// A Pad / RandomCrop padding list (1, 2 or 4 values) as left, top, right, bottom.
std::array<int, 4> PaddingSides(const std::vector<int>& padding);
// The size a pad or random_crop op pads an image of `size` to before it
// crops (the input's size for other ops), so that a pipeline can refuse a
// sample too large to hold before it is allocated.
cv::Size PaddedSize(const v1::Op& op, cv::Size size);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_GEOMETRIC_OPS_H_
