#include "client/mixup.h"

#include <cmath>
#include <random>
#include <set>

#include "client/device_stager.h"
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

Batch MakeBatch(int n, int h, int w, uint32_t seed) {
  Batch b;
  b.shape = {n, h, w, 3};
  b.data = HostBuffer(static_cast<size_t>(n * h * w * 3));
  std::mt19937 rng(seed);
  for (size_t i = 0; i < b.data.size(); ++i) b.data.data()[i] = static_cast<uint8_t>(rng());
  for (int i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>(rng() % 10));
  for (int i = 0; i < n; ++i) b.sample_indices.push_back(i);
  return b;
}

// The stager's mixed tensor against the plain conversion mixed here, element
// by element, for every kind of draw, type and layout.
TEST(MixupTest, TheCpuStagerMixesTheConvertedBatchAsTimmDoes) {
  for (TensorType type : {TensorType::kFloat32, TensorType::kFloat16, TensorType::kBFloat16}) {
    for (TensorLayout layout : {TensorLayout::kNCHW, TensorLayout::kNHWC}) {
      DeviceOptions o;
      o.device = DeviceOptions::Device::kCpu;
      o.type = type;
      o.layout = layout;
      auto stager = DeviceStager::Create(o, nullptr);
      ASSERT_TRUE(stager.ok());
      const MixupOptions mix = Options(0.8, 1.0, 0.8);
      ASSERT_TRUE((*stager)->SetMixup(mix).ok());
      std::set<std::string> kinds;
      for (int b = 0; b < 12; ++b) {
        const int n = 5, h = 9, w = 11;
        Batch batch = MakeBatch(n, h, w, static_cast<uint32_t>(b));
        batch.epoch = 1;
        batch.batch_index = b;
        ConvertSpec plain;
        plain.n = n;
        plain.h = h;
        plain.w = w;
        plain.layout = TensorLayout::kNHWC;
        for (int c = 0; c < 3; ++c) {
          plain.mean[c] = o.mean[c];
          plain.inv_std[c] = 1.0f / o.std[c];
        }
        std::vector<float> value(static_cast<size_t>(n * h * w * 3));
        ConvertOnCpu(batch.data.data(), plain, value.data());
        const std::vector<int32_t> labels = batch.labels;
        const MixDraw d = DrawMix(mix, 1, b, h, w);
        kinds.insert(d.lam == 1 ? "none" : d.cutmix ? "cutmix" : "mixup");
        auto t = (*stager)->Stage(std::move(batch));
        ASSERT_TRUE(t.ok()) << t.status();
        ASSERT_NE(t->targets, nullptr);
        EXPECT_EQ(t->targets_shape, (std::vector<int64_t>{n, 10}));
        std::vector<float> targets(n * 10);
        SoftTargets(mix, d, labels, targets.data());
        for (int i = 0; i < n * 10; ++i) ASSERT_EQ(t->targets[i], targets[i]) << i;
        for (int i = 0; i < n; ++i) {
          for (int y = 0; y < h; ++y) {
            for (int x = 0; x < w; ++x) {
              for (int c = 0; c < 3; ++c) {
                const float own = value[((i * h + y) * w + x) * 3 + c];
                const float other = value[(((n - 1 - i) * h + y) * w + x) * 3 + c];
                float want = own;
                if (d.cutmix) {
                  if (y >= d.box[0] && y < d.box[1] && x >= d.box[2] && x < d.box[3]) want = other;
                } else if (d.lam != 1) {
                  const float a = own * static_cast<float>(d.lam);
                  const float b2 = other * static_cast<float>(1 - d.lam);
                  want = a + b2;
                }
                const size_t at = layout == TensorLayout::kNHWC ? ((i * h + y) * w + x) * 3 + c
                                                                 : ((i * 3 + c) * h + y) * w + x;
                float got;
                if (type == TensorType::kFloat32) {
                  got = static_cast<const float*>(t->data)[at];
                } else {
                  const uint16_t bits = static_cast<const uint16_t*>(t->data)[at];
                  got = type == TensorType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
                  want = type == TensorType::kFloat16 ? HalfToFloat(FloatToHalf(want))
                                                      : BFloat16ToFloat(FloatToBFloat16(want));
                }
                ASSERT_EQ(got, want) << TensorTypeName(type) << " batch " << b << " image " << i << " at " << y
                                     << "," << x << "," << c;
              }
            }
          }
        }
      }
      EXPECT_EQ(kinds, (std::set<std::string>{"none", "mixup", "cutmix"}));
    }
  }
}

TEST(MixupTest, TheStagerRefusesUint8AndLabelsOutsideTheClasses) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCpu;
  o.type = TensorType::kUInt8;
  auto u8 = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(u8.ok());
  const absl::Status refused = (*u8)->SetMixup(Options(0.8, 1.0));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("float"), std::string::npos) << refused;
  MixupOptions no_classes = Options(0.8, 1.0);
  no_classes.num_classes = 0;
  o.type = TensorType::kFloat32;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok());
  EXPECT_EQ((*stager)->SetMixup(no_classes).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*stager)->SetMixup(Options(0.8, 1.0)).ok());
  Batch batch = MakeBatch(3, 4, 4, 1);
  batch.labels[1] = 12;
  auto t = (*stager)->Stage(std::move(batch));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("label 12"), std::string::npos) << t.status();
  // The slot went back: the next good batch stages.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE((*stager)->Stage(MakeBatch(3, 4, 4, 2)).ok());
}

}  // namespace
}  // namespace stoker
