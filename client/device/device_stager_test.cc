#include "client/device/device_stager.h"

#include <random>
#include <set>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

Batch MakeBatch(int n, int h, int w, uint32_t seed) {
  Batch b;
  b.shape = {n, h, w, 3};
  b.data = HostBuffer(static_cast<size_t>(n * h * w * 3));
  std::mt19937 rng(seed);
  for (size_t i = 0; i < b.data.size(); ++i) b.data.data()[i] = static_cast<uint8_t>(rng());
  return b;
}

TEST(DeviceStagerTest, CudaWithoutAUsableDeviceIsAClearErrorAndAutoFallsBack) {
  if (CudaUsable(0).ok()) GTEST_SKIP() << "a CUDA device is usable here; the fallback is not exercised";
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCuda;
  auto cuda = DeviceStager::Create(o, nullptr);
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(cuda.status().message().find("--device cuda"), std::string::npos) << cuda.status();
  o.device = DeviceOptions::Device::kAuto;
  auto fallback = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_STREQ((*fallback)->path(), "cpu");
}

TEST(DeviceStagerTest, CpuPathConvertsLikeTheReferenceAndReportsCopies) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCpu;
  o.type = TensorType::kFloat32;
  o.batch_bytes = 2 * 4 * 5 * 3;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok());
  EXPECT_EQ((*stager)->host_buffers()->FreeCount(), o.host_slots) << "the host ring is allocated up front";
  Batch batch = MakeBatch(2, 4, 5, 1);
  ConvertSpec spec;
  spec.n = 2;
  spec.h = 4;
  spec.w = 5;
  for (int c = 0; c < 3; ++c) {
    spec.mean[c] = o.mean[c];
    spec.inv_std[c] = 1.0f / o.std[c];
  }
  std::vector<float> expected(2 * 3 * 4 * 5);
  ConvertOnCpu(batch.data.data(), spec, expected.data());
  auto tensor = (*stager)->Stage(std::move(batch));
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->shape, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_TRUE((*stager)->Wait(*tensor).ok());
  const float* got = static_cast<const float*>(tensor->data);
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(got[i], expected[i]) << i;
  int64_t bytes = 0;
  double seconds = 0;
  (*stager)->CopyStats(&bytes, &seconds);
  EXPECT_EQ(bytes, 2 * 4 * 5 * 3);
}

TEST(DeviceStagerTest, ShapeThatDisagreesWithTheBytesIsRefused) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCpu;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok());
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
           {2, 4, 6, 3}, {1, 4, 5, 3}, {2, -4, -5, 3}, {int64_t{1} << 40, int64_t{1} << 40, 2, 3}}) {
    Batch batch = MakeBatch(2, 4, 5, 1);  // 120 bytes
    batch.shape = shape;
    auto staged = (*stager)->Stage(std::move(batch));
    ASSERT_FALSE(staged.ok());
    EXPECT_EQ(staged.status().code(), absl::StatusCode::kInvalidArgument) << staged.status();
  }
}

TEST(DeviceStagerTest, SlotsAreReusedOnlyAfterRelease) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCpu;
  o.slots = 2;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok());
  auto a = (*stager)->Stage(MakeBatch(1, 2, 2, 1));
  auto b = (*stager)->Stage(MakeBatch(1, 2, 2, 2));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->data, b->data);
  const std::vector<float> a_values(static_cast<const float*>(a->data), static_cast<const float*>(a->data) + 12);
  // A third Stage must wait for a slot; release `b` from another thread.
  absl::Notification staged;
  std::thread third([&] {
    auto c = (*stager)->Stage(MakeBatch(1, 2, 2, 3));
    EXPECT_TRUE(c.ok());
    staged.Notify();
  });
  EXPECT_FALSE(staged.WaitForNotificationWithTimeout(absl::Milliseconds(200))) << "a slot was reused while held";
  b->lease.reset();
  EXPECT_TRUE(staged.WaitForNotificationWithTimeout(absl::Seconds(10)));
  third.join();
  EXPECT_EQ(std::vector<float>(static_cast<const float*>(a->data), static_cast<const float*>(a->data) + 12), a_values);
}

TEST(DeviceStagerTest, TheRingGrowsToMaxSlotsThenFailsAfterTheWait) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCpu;
  o.slots = 1;
  o.max_slots = 3;
  o.slot_wait = absl::Milliseconds(50);
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok());
  std::vector<DeviceTensor> held;
  std::vector<std::vector<float>> values;
  for (int i = 0; i < 3; ++i) {
    auto t = (*stager)->Stage(MakeBatch(1, 2, 2, 10 + i));
    ASSERT_TRUE(t.ok()) << i << ": " << t.status();
    values.emplace_back(static_cast<const float*>(t->data), static_cast<const float*>(t->data) + 12);
    held.push_back(*std::move(t));
  }
  auto refused = (*stager)->Stage(MakeBatch(1, 2, 2, 20));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("all 3 tensor slots"), std::string::npos) << refused.status();
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(std::vector<float>(static_cast<const float*>(held[i].data), static_cast<const float*>(held[i].data) + 12),
              values[i])
        << "held tensor " << i << " was overwritten";
  }
  held[1].Release(nullptr);
  EXPECT_EQ(held[1].data, nullptr);
  EXPECT_TRUE((*stager)->Stage(MakeBatch(1, 2, 2, 21)).ok()) << "a released slot is reused";
}

TEST(DeviceStagerTest, Uint8NhwcIsHandedOverWithoutACopyAndNchwIsTransposed) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCpu;
  o.type = TensorType::kUInt8;
  o.layout = TensorLayout::kNHWC;
  o.slots = 1;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok());
  Batch batch = MakeBatch(2, 3, 4, 5);
  const uint8_t* received = batch.data.data();
  const std::vector<uint8_t> bytes(received, received + batch.data.size());
  auto a = (*stager)->Stage(std::move(batch));
  auto b = (*stager)->Stage(MakeBatch(2, 3, 4, 6));  // no slot taken: one slot does not limit
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->data, received);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3, 4, 3}));
  o.layout = TensorLayout::kNCHW;
  auto nchw_stager = DeviceStager::Create(o, nullptr);
  Batch again = MakeBatch(2, 3, 4, 5);
  auto c = (*nchw_stager)->Stage(std::move(again));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->shape, (std::vector<int64_t>{2, 3, 3, 4}));
  const uint8_t* planar = static_cast<const uint8_t*>(c->data);
  for (int n = 0; n < 2; ++n) {
    for (int ch = 0; ch < 3; ++ch) {
      for (int p = 0; p < 12; ++p) ASSERT_EQ(planar[(n * 3 + ch) * 12 + p], bytes[(n * 12 + p) * 3 + ch]);
    }
  }
}

TEST(DeviceStagerTest, ATensorOutlivesItsStager) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCpu;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok());
  auto t = (*stager)->Stage(MakeBatch(1, 2, 2, 1));
  ASSERT_TRUE(t.ok());
  const std::vector<float> before(static_cast<const float*>(t->data), static_cast<const float*>(t->data) + 12);
  stager->reset();  // e.g. a Python loader collected before the tensors it yielded
  EXPECT_EQ(std::vector<float>(static_cast<const float*>(t->data), static_cast<const float*>(t->data) + 12), before);
  t->Release(nullptr);
}

TEST(DeviceStagerTest, RefusesBatchesThatAreNotUint8Nhwc) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCpu;
  auto stager = DeviceStager::Create(o, nullptr);
  Batch b = MakeBatch(1, 2, 2, 1);
  b.layout = v1::NCHW;
  EXPECT_EQ((*stager)->Stage(std::move(b)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceStagerTest, DeviceNamesParseOrNameTheBadValue) {
  EXPECT_EQ(*ParseDevice("auto"), DeviceOptions::Device::kAuto);
  EXPECT_EQ(*ParseDevice("cuda"), DeviceOptions::Device::kCuda);
  EXPECT_EQ(*ParseDevice("cpu"), DeviceOptions::Device::kCpu);
  const auto bad = ParseDevice("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'gpu'"), std::string::npos);
}

// MixUp / CutMix in the stager (client/mixup.h): batches with labels, and
// the settings the tests below share.
Batch LabelledBatch(int n, int h, int w, uint32_t seed) {
  Batch b = MakeBatch(n, h, w, seed);
  for (int i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>((seed + 7u * static_cast<uint32_t>(i)) % 10));
  for (int i = 0; i < n; ++i) b.sample_indices.push_back(i);
  return b;
}

// mixup_alpha, cutmix_alpha, mix_prob, switch_prob, label_smoothing, num_classes, seed.
MixupOptions Mixing(double mixup_alpha, double cutmix_alpha, double mix_prob = 1.0) {
  return MixupOptions{mixup_alpha, cutmix_alpha, mix_prob, 0.5, 0.1, 10, 7};
}

// The stager's mixed tensor against the plain conversion mixed here, element
// by element, for every kind of draw, type and layout.
TEST(DeviceStagerTest, TheCpuStagerMixesTheConvertedBatchAsTimmDoes) {
  for (TensorType type : {TensorType::kFloat32, TensorType::kFloat16, TensorType::kBFloat16}) {
    for (TensorLayout layout : {TensorLayout::kNCHW, TensorLayout::kNHWC}) {
      DeviceOptions o;
      o.device = DeviceOptions::Device::kCpu;
      o.type = type;
      o.layout = layout;
      auto stager = DeviceStager::Create(o, nullptr);
      ASSERT_TRUE(stager.ok());
      const MixupOptions mix = Mixing(0.8, 1.0, 0.8);
      ASSERT_TRUE((*stager)->SetMixup(mix).ok());
      std::set<std::string> kinds;
      for (int b = 0; b < 12; ++b) {
        const int n = 5, h = 9, w = 11;
        Batch batch = LabelledBatch(n, h, w, static_cast<uint32_t>(b));
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
                const size_t at =
                    layout == TensorLayout::kNHWC ? ((i * h + y) * w + x) * 3 + c : ((i * 3 + c) * h + y) * w + x;
                float got;
                if (type == TensorType::kFloat32) {
                  got = static_cast<const float*>(t->data)[at];
                } else {
                  const uint16_t bits = static_cast<const uint16_t*>(t->data)[at];
                  got = type == TensorType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
                  want = type == TensorType::kFloat16 ? HalfToFloat(FloatToHalf(want))
                                                      : BFloat16ToFloat(FloatToBFloat16(want));
                }
                ASSERT_EQ(got, want) << TensorTypeName(type) << " batch " << b << " image " << i << " at " << y << ","
                                     << x << "," << c;
              }
            }
          }
        }
      }
      EXPECT_EQ(kinds, (std::set<std::string>{"none", "mixup", "cutmix"}));
    }
  }
}

TEST(DeviceStagerTest, MixingRefusesUint8AndLabelsOutsideTheClasses) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCpu;
  o.type = TensorType::kUInt8;
  auto u8 = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(u8.ok());
  const absl::Status refused = (*u8)->SetMixup(Mixing(0.8, 1.0));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("float"), std::string::npos) << refused;
  MixupOptions no_classes = Mixing(0.8, 1.0);
  no_classes.num_classes = 0;
  o.type = TensorType::kFloat32;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok());
  EXPECT_EQ((*stager)->SetMixup(no_classes).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*stager)->SetMixup(Mixing(0.8, 1.0)).ok());
  Batch batch = LabelledBatch(3, 4, 4, 1);
  batch.labels[1] = 12;
  auto t = (*stager)->Stage(std::move(batch));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("label 12"), std::string::npos) << t.status();
  // The slot went back: the next good batch stages.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE((*stager)->Stage(LabelledBatch(3, 4, 4, 2)).ok());
}

}  // namespace
}  // namespace stoker
