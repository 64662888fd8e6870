// The detection ops' parameter draws, as pure functions (the pipeline applies
// them to the image and the targets through one GeometryStep each):
// resize_pad's scaled size and random_iou_crop's crop box. Thread-safe.
#ifndef STOKER_DATAPLANE_OPS_DETECTION_OPS_H_
#define STOKER_DATAPLANE_OPS_DETECTION_OPS_H_

#include <optional>
#include <vector>

#include <opencv2/core.hpp>
#include "common/rng.h"
#include "dataplane/kernels/transforms.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// The size resize_pad scales a height x width image to: the longer side
// `size`, the shorter one round(short * size / long) (halves to even, as
// Python's round), at least 1.
cv::Size ResizePadSize(int height, int width, int size);

// Load-bearing for determinism: how many times random_iou_crop draws an
// option before it gives up and leaves the image as it is.
inline constexpr int kIouCropMaxOptionDraws = 50;

// torchvision.transforms.v2.RandomIoUCrop's choice for an image of height x
// width with boxes (xyxy, 4 floats each): nullopt when the drawn option is 1
// or more (no crop) or no draw succeeded. Draws only from `rng`.
std::optional<CropBox> RandomIouCropBox(const v1::RandomIoUCrop& options, int height, int width,
                                        const std::vector<float>& boxes, Rng& rng);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_DETECTION_OPS_H_
