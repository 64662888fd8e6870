#include "client/device_stager.h"

#include <random>
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

}  // namespace
}  // namespace stoker
