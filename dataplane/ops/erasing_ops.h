// Random erasing (torchvision.transforms.RandomErasing, Zhong et al. 2017)
// on 8-bit RGB images: the box drawn as torchvision draws it, filled with a
// value or with per-pixel noise. Pure functions; thread-safe. Registered as
// the pipeline op random_erasing (op_registry.h).
#ifndef STOKER_DATAPLANE_OPS_ERASING_OPS_H_
#define STOKER_DATAPLANE_OPS_ERASING_OPS_H_

#include <optional>

#include "common/rng.h"
#include "dataplane/kernels/transforms.h"

namespace stoker {

// RandomErasing.get_params: up to 10 tries of an area fraction uniform in
// [scale_min, scale_max] and an aspect ratio (height over width)
// log-uniform in [ratio_min, ratio_max], h = round(sqrt(area x ratio)), w =
// round(sqrt(area / ratio)); the first with h < height and w < width is
// placed uniformly. None when no try fits.
std::optional<CropBox> RandomErasingBox(int height, int width, double scale_min, double scale_max, double ratio_min,
                                        double ratio_max, Rng& rng);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_ERASING_OPS_H_
