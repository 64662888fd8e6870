#include "client/device/mixup.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace stoker {
namespace {

MixupOptions Options(double mixup_alpha, double cutmix_alpha, double mix_prob = 1.0) {
  MixupOptions o;
  o.mixup_alpha = mixup_alpha;
  o.cutmix_alpha = cutmix_alpha;
  o.mix_prob = mix_prob;
  o.num_classes = 10;
  o.seed = 7;
  return o;
}

TEST(MixupTest, DrawsFollowTheProbabilitiesAndTheBetaDistribution) {
  const MixupOptions o = Options(0.8, 1.0, 0.7);
  int mixed = 0, cutmix = 0;
  double sum = 0, sum2 = 0;
  int mixups = 0;
  const int kDraws = 20000;
  for (int b = 0; b < kDraws; ++b) {
    const MixDraw d = DrawMix(o, 3, b, 224, 224);
    if (d.raw.size() == 1) {
      EXPECT_EQ(d.lam, 1.0);
      continue;
    }
    ++mixed;
    if (d.cutmix) {
      ++cutmix;
      ASSERT_EQ(d.raw.size(), 5u);
      const int64_t area = (d.box[1] - d.box[0]) * (d.box[3] - d.box[2]);
      EXPECT_DOUBLE_EQ(d.lam, 1.0 - area / (224.0 * 224.0));
      EXPECT_LE(d.box[0], d.box[1]);
      EXPECT_LE(d.box[1], 224);
    } else {
      ASSERT_EQ(d.raw.size(), 3u);
      EXPECT_EQ(d.lam, d.raw[2]);
      sum += d.lam;
      sum2 += d.lam * d.lam;
      ++mixups;
    }
  }
  EXPECT_NEAR(mixed / double(kDraws), 0.7, 0.02);
  EXPECT_NEAR(cutmix / double(mixed), 0.5, 0.02);
  // Beta(0.8, 0.8): mean 1/2, variance ab / ((a+b)^2 (a+b+1)) = 0.0962.
  const double mean = sum / mixups, var = sum2 / mixups - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(var, 0.64 / (2.56 * 2.6), 0.005);
}

TEST(MixupTest, DrawsDependOnSeedEpochAndBatchOnly) {
  const MixupOptions o = Options(0.8, 1.0);
  EXPECT_EQ(DrawMix(o, 2, 5, 64, 64).raw, DrawMix(o, 2, 5, 64, 64).raw);
  EXPECT_NE(DrawMix(o, 2, 5, 64, 64).raw, DrawMix(o, 2, 6, 64, 64).raw);
  EXPECT_NE(DrawMix(o, 2, 5, 64, 64).raw, DrawMix(o, 3, 5, 64, 64).raw);
  MixupOptions other = o;
  other.seed = 8;
  EXPECT_NE(DrawMix(o, 2, 5, 64, 64).raw, DrawMix(other, 2, 5, 64, 64).raw);
}

TEST(MixupTest, BadSettingsAreNamed) {
  struct Case {
    MixupOptions o;
    const char* text;
  };
  MixupOptions neg = Options(-1, 1), none = Options(0, 0), prob = Options(1, 0, 1.5), smooth = Options(1, 0),
               nan = Options(NAN, 1);
  smooth.label_smoothing = -0.1;
  for (const Case& c : {Case{neg, "mixup_alpha = -1"}, Case{none, "both 0"}, Case{prob, "mix_prob = 1.5"},
                        Case{smooth, "label_smoothing"}, Case{nan, "mixup_alpha"}}) {
    const absl::Status s = ValidateMixup(c.o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(s.message().find(c.text), std::string::npos) << s;
  }
  EXPECT_TRUE(ValidateMixup(Options(0.8, 0)).ok());
  const absl::Status label = CheckLabels({1, 10, 2}, 10);
  EXPECT_EQ(label.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(label.message().find("label 10"), std::string::npos) << label;
  EXPECT_EQ(CheckLabels({-1}, 10).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MixupTest, SoftTargetsAreTheWeightedSmoothedOneHotRows) {
  MixupOptions o = Options(1, 0);
  o.label_smoothing = 0.1;
  MixDraw d;
  d.lam = 0.3;
  const std::vector<int32_t> labels = {2, 5, 2, 7};
  std::vector<float> t(4 * 10);
  SoftTargets(o, d, labels, t.data());
  const float off = 0.01f, on = 0.91f;
  for (int i = 0; i < 4; ++i) {
    double total = 0;
    for (int k = 0; k < 10; ++k) {
      const float a = (k == labels[i] ? on : off) * 0.3f, b = (k == labels[3 - i] ? on : off) * 0.7f;
      EXPECT_EQ(t[i * 10 + k], a + b) << i << "," << k;
      total += t[i * 10 + k];
    }
    EXPECT_NEAR(total, 1.0, 1e-6);
  }
}

}  // namespace
}  // namespace stoker
