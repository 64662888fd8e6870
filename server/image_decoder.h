// Decodes an encoded image into 8-bit RGB. The format is detected from the
// bytes, not the file name: JPEG goes through libjpeg-turbo (TurboJPEG API),
// other formats through OpenCV's codecs. Thread-safe (each call owns its
// decoder state); the returned image owns its pixels.
#ifndef STOKER_SERVER_IMAGE_DECODER_H_
#define STOKER_SERVER_IMAGE_DECODER_H_

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include <opencv2/core.hpp>

namespace stoker {

// True when the bytes start with a JPEG SOI marker.
bool LooksLikeJpeg(absl::string_view bytes);

// Returns a CV_8UC3 image in RGB order. INVALID_ARGUMENT names what is wrong
// (empty, unknown format, corrupt data).
absl::StatusOr<cv::Mat> DecodeImage(absl::string_view bytes);

}  // namespace stoker

#endif  // STOKER_SERVER_IMAGE_DECODER_H_
