#include "dataplane/ops/op_registry.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/ops/geometric_ops.h"
#include "dataplane/decode/image_decoder.h"

namespace stoker {

const OpEntry* FindOp(v1::Op::OpCase op) {
  static const auto* table = [] {
    auto* t = new std::map<v1::Op::OpCase, OpEntry>();
    for (const auto* family :
         {&CoreOps(), &MediaOps(), &PhotometricOps(), &ErasingOps(), &GeometricOps(), &PolicyOps()}) {
      for (const OpEntry& e : *family) t->emplace(e.op, e);
    }
    return t;
  }();
  auto it = table->find(op);
  return it == table->end() ? nullptr : &it->second;
}

absl::Status LimitPaddedPixels(const v1::Op& op, cv::Size input, int64_t max_pixels) {
  const cv::Size padded = PaddedSize(op, input);
  const int64_t pixels = int64_t{padded.width} * padded.height;
  if (pixels > (max_pixels > 0 ? max_pixels : int64_t{1} << 28)) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat(PipelineToText({op}), " of ", input.width, "x", input.height, " would make ",
                                    padded.width, "x", padded.height, " pixels; --max-pixels is ", max_pixels));
  }
  return absl::OkStatus();
}

absl::Status CheckProbability(const std::string& where, bool has_p, float p) {
  if (has_p && !(p >= 0 && p <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.p = %g; allowed range is 0..1", where, p));
  }
  return absl::OkStatus();
}

absl::Status CheckFill(const std::string& where, const google::protobuf::RepeatedField<float>& fill) {
  if (fill.size() != 0 && fill.size() != 1 && fill.size() != 3) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.fill has %d values; give 1 or 3 (R:G:B)", where, fill.size()));
  }
  for (float v : fill) {
    if (!(v >= 0 && v <= 255)) return absl::InvalidArgumentError(absl::StrFormat("%s.fill has %g; each in 0..255", where, v));
  }
  return absl::OkStatus();
}

std::optional<cv::Scalar> FillColour(const google::protobuf::RepeatedField<float>& fill) {
  if (fill.empty()) return std::nullopt;
  if (fill.size() == 1) return cv::Scalar::all(std::nearbyint(fill[0]));
  return cv::Scalar(std::nearbyint(fill[0]), std::nearbyint(fill[1]), std::nearbyint(fill[2]));
}

absl::Status CheckWarpInterpolation(const std::string& where, bool has, v1::Interpolation interpolation) {
  if (has && interpolation == v1::BICUBIC) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".interpolation = bicubic; warps take nearest or bilinear"));
  }
  return absl::OkStatus();
}

bool PassesGate(bool has_p, float p, float otherwise, Rng& rng) {
  const float q = has_p ? p : otherwise;
  if (q >= 1) return true;
  return rng.UniformDouble() < q;
}

}  // namespace stoker
