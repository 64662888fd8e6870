// Decodes encoded images into 8-bit RGB. The format is detected from the
// bytes, not the file name. JPEG goes through libjpeg-turbo's libjpeg API,
// which can decode just a region (jpeg_crop_scanline / jpeg_skip_scanlines)
// and scale by M/8 (M = 1..8) in the DCT domain; grayscale, CMYK/YCCK and
// progressive JPEGs come out as RGB. PNG (8/16-bit, palette, alpha), WebP,
// TIFF, BMP and PNM go through their own libraries (image_codecs.h) and are
// converted to 8-bit RGB. Thread-safe (each call owns its decoder state); results own their pixels.
#ifndef STOKER_DATAPLANE_DECODE_IMAGE_DECODER_H_
#define STOKER_DATAPLANE_DECODE_IMAGE_DECODER_H_

#include <cstdint>
#include <string>

#include <opencv2/core.hpp>
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dataplane/base/crop_box.h"

namespace stoker {

enum class ImageFormat { kJpeg, kPng, kWebp, kOther };

struct ImageInfo {
  ImageFormat format = ImageFormat::kOther;
  int width = 0;
  int height = 0;
};

// Why a sample could not be decoded; also the `reason` label of
// stoker_server_samples_failed_total. A small fixed set (load-bearing: the
// label values are part of the metrics contract).
// kMissingField and kBadField are a sample's other fields (sample_fields.h).
enum class DecodeFailure {
  kEmpty,
  kNotAnImage,
  kTruncated,
  kCorrupt,
  kTooLarge,
  kMissingField,
  kBadField,
  kTransform /* a user op (python, plugin) failed */,
  kUnsupported /* audio/video: no stream of the kind, or a codec the server lacks */
};
const char* DecodeFailureName(DecodeFailure failure);

// Errors carry the failure kind in their payload so callers can count them.
absl::Status DecodeError(DecodeFailure failure, absl::string_view detail);
DecodeFailure DecodeFailureOf(const absl::Status& status);

// A failure caused by a timer (the sample's CPU time, a Python worker's
// timeout or crash, media decoding past its wall-clock bound), which depends
// on the server's load, not on the data: DEADLINE_EXCEEDED with a marker
// that IsTimerError finds. Never a bad sample: the batch fails as
// retryable (sample_watch.h, batch_session.cc). `detail` names the limit.
absl::Status TimerError(absl::string_view detail);
bool IsTimerError(const absl::Status& status);

// Reads the dimensions from the header only. JPEG and PNG headers are parsed
// without decoding; so are WebP, BMP, PNM and TIFF headers.
absl::StatusOr<ImageInfo> ProbeImage(absl::string_view bytes);

// Decodes `region` (full-image coordinates; empty means the whole image) of
// the image, scaled by `scale_eighths` / 8 (1..8; 8 is full size). For JPEG
// the region is decoded directly and the scaling happens in the DCT domain
// (libjpeg-turbo's scaled inverse DCTs); other formats are decoded whole, cut
// and resized (area) to the same result size: round(region size x M / 8).
// `max_pixels` bounds width x height from the header before any pixel buffer
// is allocated (0: no limit).
absl::StatusOr<cv::Mat> DecodeImage(absl::string_view bytes, const CropBox& region = {}, int scale_eighths = 8,
                                    int64_t max_pixels = 0);

// True when the bytes start with a JPEG SOI marker.
bool LooksLikeJpeg(absl::string_view bytes);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_IMAGE_DECODER_H_
