// Augmentation policies: their magnitudes where torchvision's tables give
// round numbers, AutoAugment choosing only its table's ops, AugMix's
// weights summing to one, Gamma draws with the right mean, and the policies
// as pipeline ops (validated by name, random, refused with targets).
// torchvision is the reference in python/tests/test_policies.py.
#include "dataplane/ops/policy_ops.h"

#include <set>

#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(PolicyOpsTest, RandAugmentsDefaultMagnitudeIsBinNineOfThirtyOne) {
  v1::RandAugment o;
  o.set_num_ops(50);
  o.set_magnitude(9);
  o.set_num_magnitude_bins(31);
  Rng rng(2);
  std::set<std::string> seen;
  for (const PolicyStep& s : DrawRandAugment(o, 224, 224, rng)) {
    const float m = std::fabs(s.magnitude);
    switch (s.op) {
      case PolicyOp::kRotate: EXPECT_FLOAT_EQ(m, 9.0f); break;        // 30 x 9 / 30
      case PolicyOp::kShearX: EXPECT_NEAR(m, 0.09f, 1e-6); break;     // 0.3 x 9 / 30
      case PolicyOp::kPosterize: EXPECT_EQ(m, 7.0f); break;           // 8 - round(9 / 7.5)
      case PolicyOp::kSolarize: EXPECT_NEAR(m, 178.5f, 1e-3); break;  // 255 - 255 x 9 / 30
      case PolicyOp::kIdentity:
      case PolicyOp::kEqualize:
      case PolicyOp::kAutoContrast: EXPECT_EQ(m, 0); break;
      default: break;
    }
    seen.insert(PolicyOpName(s.op));
  }
  EXPECT_GT(seen.size(), 8u);
  EXPECT_EQ(seen.count("Invert"), 0u);  // not in RandAugment's space
}

TEST(PolicyOpsTest, AutoAugmentChoosesOnlyItsTablesOps) {
  Rng rng(3);
  std::set<std::string> svhn;
  for (int i = 0; i < 2000; ++i) {
    for (const PolicyStep& s : DrawAutoAugment(v1::SVHN, 32, 32, rng)) svhn.insert(PolicyOpName(s.op));
  }
  EXPECT_EQ(svhn, (std::set<std::string>{"AutoContrast", "Contrast", "Equalize", "Invert", "Rotate", "ShearX", "ShearY",
                                         "Solarize", "TranslateX", "TranslateY"}));
}

TEST(PolicyOpsTest, AugMixWeightsSumToOneAndGammaHasItsMean) {
  v1::AugMix o;
  o.set_severity(3);
  o.set_mixture_width(3);
  o.set_chain_depth(-1);
  o.set_alpha(1);
  o.set_all_ops(true);
  Rng rng(4);
  for (int i = 0; i < 100; ++i) {
    const AugMixDraw d = DrawAugMix(o, 64, 64, rng);
    double total = d.original;
    for (double w : d.weights) total += w;
    EXPECT_NEAR(total, 1.0, 1e-9);
    for (const auto& chain : d.chains) {
      EXPECT_GE(chain.size(), 1u);
      EXPECT_LE(chain.size(), 3u);
    }
  }
  for (double alpha : {0.3, 1.0, 4.0}) {
    double sum = 0;
    for (int i = 0; i < 40000; ++i) sum += GammaDraw(alpha, rng);
    EXPECT_NEAR(sum / 40000, alpha, 0.05 * alpha + 0.01) << alpha;
  }
}

absl::StatusOr<Pipeline> Make(const std::string& text, bool boxes = false) {
  v1::SessionConfig c;
  c.set_batch_size(1);
  const absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(text);
  if (!ops.ok()) return ops.status();
  for (const v1::Op& op : *ops) *c.add_pipeline() = op;
  if (boxes) {
    v1::FieldSpec* f = c.add_fields();
    f->set_name("boxes");
    f->set_kind(v1::BOXES);
  }
  return Pipeline::Create(c);
}

TEST(PolicyOpsTest, PoliciesArePipelineOpsValidatedByName) {
  for (const char* text : {"center_crop(32), auto_augment(policy=cifar10)", "center_crop(32), rand_augment(2, 9)",
                           "center_crop(32), trivial_augment_wide()", "center_crop(32), augmix(severity=5)"}) {
    absl::StatusOr<Pipeline> p = Make(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status();
    cv::Mat image(40, 40, CV_8UC3);
    cv::randu(image, 0, 256);
    Rng rng(1);
    absl::StatusOr<cv::Mat> out = p->Apply(image, rng);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->size(), cv::Size(32, 32));
    EXPECT_FALSE(Pipeline::CreatePrefix({p->ops()[1]}).ok()) << text << " is random";
  }
  EXPECT_NE(Make("center_crop(32), rand_augment(magnitude=31)")
                .status()
                .message()
                .find("rand_augment.magnitude = 31; allowed range is 0..30"),
            std::string::npos);
  EXPECT_NE(Make("center_crop(32), augmix(alpha=0)").status().message().find("augmix.alpha"), std::string::npos);
  EXPECT_TRUE(Make("center_crop(32), trivial_augment_wide()", true).ok()) << "the policies move targets";
  EXPECT_NE(Make("center_crop(32), augmix()", true).status().message().find("augmix cannot move boxes"),
            std::string::npos);
}

}  // namespace
}  // namespace stoker
