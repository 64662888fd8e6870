#include "dataplane/ops/op_entry.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker {

OpEntry WithParams(std::vector<OpParam> params, OpEntry entry) {
  entry.params = std::move(params);
  return entry;
}

OpEntry SetsSize(OpEntry entry) {
  entry.sets_size = true;
  return entry;
}

OpEntry Storable(int64_t (*pixels)(const v1::Op& op, int64_t pixels), OpEntry entry) {
  entry.storable = true;
  entry.pixels = pixels;
  return entry;
}

OpEntry OnlyFirst(const char* why, OpEntry entry) {
  entry.rules.place = OpRules::kFirst;
  entry.rules.place_why = why;
  return entry;
}

OpEntry OnlyLast(OpEntry entry) {
  entry.rules.place = OpRules::kLast;
  return entry;
}

OpEntry NeedsBoxes(const char* why, OpEntry entry) {
  entry.rules.boxes_why = why;
  return entry;
}

OpEntry NeedsFloat(const char* why, OpEntry entry) {
  entry.rules.float_why = why;
  return entry;
}

OpEntry RefusesTargets(const char* why, OpEntry entry) {
  entry.targets = OpTargets::kRefused;
  entry.rules.refused_why = why;
  return entry;
}

std::string OpName(const OpEntry& entry, const v1::Op& op) {
  return entry.name != nullptr ? entry.name : v1::Op::descriptor()->FindFieldByNumber(op.op_case())->name();
}

absl::Status CheckFill(const std::string& where, const google::protobuf::RepeatedField<float>& fill) {
  if (fill.size() != 0 && fill.size() != 1 && fill.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.fill has %d values; give 1 or 3 (R:G:B)", where, fill.size()));
  }
  return absl::OkStatus();  // each value's range, 0..255, is declared with the op's parameters
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
