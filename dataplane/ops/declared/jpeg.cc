// jpeg(quality_min, quality_max): compresses the image as a JPEG at a
// quality drawn in quality_min..quality_max and decodes it again, so that
// the model sees the blocking and ringing of web images (torchvision's
// v2.JPEG). A declared op with integer parameters: this file is all of it,
// with one line in ops.inc.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "dataplane/decode/image_codecs.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/op_entry.h"
#include "glog/logging.h"

namespace stoker {
namespace {

enum Param { kMin, kMax };  // the order of the declaration below

absl::Status Check(const std::string& where, v1::Op& op, OpShape*) {
  if (DeclaredValue(op, kMin) > DeclaredValue(op, kMax)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.jpeg: quality_min %g > quality_max %g", where,
                                                      DeclaredValue(op, kMin), DeclaredValue(op, kMax)));
  }
  return absl::OkStatus();
}

bool Random(const v1::Op& op) { return DeclaredValue(op, kMin) != DeclaredValue(op, kMax); }

void Apply(const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
  const auto lo = static_cast<int64_t>(DeclaredValue(op, kMin)), hi = static_cast<int64_t>(DeclaredValue(op, kMax));
  const int quality = static_cast<int>(lo == hi ? lo : rng.UniformInt(lo, hi));
  // The codecs refuse only what the pipeline never hands an op (an image
  // that is not 8-bit RGB, or empty); such an image is left as it is.
  absl::StatusOr<std::string> encoded = EncodeJpeg(image, quality);
  absl::StatusOr<cv::Mat> decoded = encoded.ok() ? DecodeImage(*encoded) : encoded.status();
  if (!decoded.ok()) {
    LOG_EVERY_N(WARNING, 1000) << "jpeg(" << quality << "): image left as it was: " << decoded.status();
    return;
  }
  image = *std::move(decoded);
}

}  // namespace

OpEntry JpegOp() {
  OpEntry e{v1::Op::kDeclared, "v2.JPEG", Check, Random, Apply, OpTargets::kUntouched};
  e.name = "jpeg";
  e.about =
      "Compresses the image as a JPEG (4:2:0, libjpeg-turbo) at a quality drawn uniformly in "
      "quality_min..quality_max for each sample and decodes it again: compression artefacts, the size unchanged.";
  e.params = {
      {"quality_min", 1, 100, 50, "", false, "The lowest quality (1: the coarsest).", OpParam::kInteger},
      {"quality_max", 1, 100, 95, "", false, "The highest quality; quality_min <= quality_max.", OpParam::kInteger}};
  return e;
}

}  // namespace stoker
