// Automatic augmentation policies as torchvision's transforms.autoaugment:
// AutoAugment (ImageNet, CIFAR-10 and SVHN sub-policies), RandAugment,
// TrivialAugmentWide and AugMix, with the same op tables, magnitude bins
// (float32 linspace), signs and draw order, each op applied as its
// _apply_op does (warps without a fill unless one is given). The draws come
// from Stoker's generator. Pure functions; thread-safe. Registered as
// pipeline ops (op_registry.h).
#ifndef STOKER_DATAPLANE_OPS_POLICY_OPS_H_
#define STOKER_DATAPLANE_OPS_POLICY_OPS_H_

#include <optional>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include "common/rng.h"
#include "dataplane/sample/geometry.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

enum class PolicyOp {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
};
// torchvision's name ("ShearX", ...).
const char* PolicyOpName(PolicyOp op);

struct PolicyStep {
  PolicyOp op = PolicyOp::kIdentity;
  float magnitude = 0;
};

// One op as torchvision's _apply_op(img, name, magnitude, interpolation,
// fill): `fill` unset is fill=None.
// The shears, translations and rotations report their steps to `geometry`
// (may be null), so that the sample's targets move with them.
void ApplyPolicyOp(cv::Mat& image, const PolicyStep& step, bool bilinear, const std::optional<cv::Scalar>& fill,
                   GeometrySink* geometry = nullptr);

// The ops one application chooses, in order, for an image of height x width.
std::vector<PolicyStep> DrawAutoAugment(v1::AutoAugmentPolicy policy, int height, int width, Rng& rng);
std::vector<PolicyStep> DrawRandAugment(const v1::RandAugment& options, int height, int width, Rng& rng);
std::vector<PolicyStep> DrawTrivialAugmentWide(const v1::TrivialAugmentWide& options, Rng& rng);

// AugMix's mixing weights and chains, drawn as torchvision draws them.
struct AugMixDraw {
  double original = 0;          // m[0]
  std::vector<double> weights;  // per chain: Dirichlet(alpha) x m[1]
  std::vector<std::vector<PolicyStep>> chains;
};
AugMixDraw DrawAugMix(const v1::AugMix& options, int height, int width, Rng& rng);
// original x image + sum of weight_i x chain_i(image), in float, truncated.
void ApplyAugMix(cv::Mat& image, const AugMixDraw& draw, bool bilinear, const std::optional<cv::Scalar>& fill);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_POLICY_OPS_H_
