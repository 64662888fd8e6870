// random_sharpness(lo, hi, p): with probability p, adjust_sharpness by a
// factor drawn uniformly in lo..hi (torchvision's RandomAdjustSharpness with
// the factor drawn rather than fixed). A declared op: this file is all of it,
// with one line in ops.inc.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "dataplane/ops/op_entry.h"
#include "dataplane/ops/photometric_ops.h"

namespace stoker {
namespace {

enum Param { kLo, kHi, kP };  // the order of the declaration below

absl::Status Check(const std::string& where, v1::Op& op, OpShape*) {
  if (DeclaredValue(op, kLo) > DeclaredValue(op, kHi)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.random_sharpness: lo %g > hi %g", where, DeclaredValue(op, kLo), DeclaredValue(op, kHi)));
  }
  return absl::OkStatus();
}

// Random unless it always runs (p = 1, as the gate compares it: a float)
// with one factor (lo = hi).
bool Random(const v1::Op& op) {
  return static_cast<float>(DeclaredValue(op, kP)) < 1 || DeclaredValue(op, kLo) != DeclaredValue(op, kHi);
}

void Apply(const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
  if (!PassesGate(true, static_cast<float>(DeclaredValue(op, kP)), 1, rng)) return;
  const double lo = DeclaredValue(op, kLo), hi = DeclaredValue(op, kHi);
  AdjustSharpness(image, lo == hi ? lo : rng.Uniform(lo, hi));
}

}  // namespace

OpEntry RandomSharpnessOp() {
  OpEntry e{v1::Op::kDeclared,    "v2.RandomAdjustSharpness (factor drawn in lo..hi)", Check, Random, Apply,
            OpTargets::kUntouched};
  e.name = "random_sharpness";
  e.about =
      "With probability p, sharpens (factor > 1) or blurs (factor < 1) the image as adjust_sharpness does, "
      "by a factor drawn uniformly in lo..hi for each sample.";
  e.params = {{"lo", 0, 1000, 0.5, "", false, "The least factor (1: the image unchanged, 0: smoothed)."},
              {"hi", 0, 1000, 2, "", false, "The greatest factor; lo <= hi."},
              {"p", 0, 1, 0.5, "", false, "The probability that the op runs."}};
  return e;
}

}  // namespace stoker
