// The image formats other than JPEG, each through its own library: PNG with
// libpng, WebP with libwebp, TIFF with libtiff, BMP with stb_image, and
// PNM (PBM, PGM, PPM, binary and ASCII, and PAM) read here. They replace
// OpenCV's imgcodecs module, whose Debian build
// links GDAL, HDF5, Poppler and a hundred more libraries that a data server
// or a wheel must not carry. Each decoder gives 8-bit RGB with the pixels
// OpenCV's imdecode(IMREAD_COLOR | IMREAD_IGNORE_ORIENTATION) gave (alpha
// dropped, 16-bit samples cut to their high byte, grey replicated), so that
// existing datasets decode to the same bytes (image_codecs_test.cc checks
// this against OpenCV). The encoders write JPEG (TurboJPEG) and PNG
// (libpng) with the settings OpenCV's imencode used, byte for byte.
#ifndef STOKER_DATAPLANE_DECODE_IMAGE_CODECS_H_
#define STOKER_DATAPLANE_DECODE_IMAGE_CODECS_H_

#include <cstdint>
#include <string>

#include <opencv2/core.hpp>
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

// PNG, WebP, TIFF, BMP or PNM (P1 to P7) bytes, told apart by their
// magic, decoded whole into an 8-bit RGB image (CV_8UC3). Errors are
// InvalidArgument naming the format and the library's message. An image of
// more than `max_pixels` (0: no limit) is refused from its header, before
// any pixel buffer exists.
absl::StatusOr<cv::Mat> DecodeOtherImage(absl::string_view bytes, int64_t max_pixels = 0);

// 8-bit RGB (CV_8UC3) to JPEG: quality 1..100, 4:2:0, baseline.
absl::StatusOr<std::string> EncodeJpeg(const cv::Mat& rgb, int quality);

// 8-bit RGB (CV_8UC3) to PNG: fast compression (zlib level 1, RLE, the Sub
// filter), no ancillary chunks.
absl::StatusOr<std::string> EncodePng(const cv::Mat& rgb);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_IMAGE_CODECS_H_
