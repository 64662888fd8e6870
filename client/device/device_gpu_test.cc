// Runs only where a CUDA device is usable; elsewhere exits 77, which ctest
// reports as skipped (never as passed). Compares the CUDA kernel with the CPU
// reference and checks the copy/slot ordering.
#include <unistd.h>
#include <cstdio>
#include <cstring>

#include <random>
#include <utility>

#include "client/device/device_stager.h"
#include "gtest/gtest.h"

#ifdef STOKER_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace stoker {
namespace {

#ifdef STOKER_HAVE_CUDA
Batch MakeBatch(const std::shared_ptr<HostBufferPool>& pool, int n, int h, int w, uint32_t seed) {
  Batch b;
  b.shape = {n, h, w, 3};
  b.data = pool->Get(static_cast<size_t>(n * h * w * 3));
  std::mt19937 rng(seed);
  for (size_t i = 0; i < b.data.size(); ++i) b.data.data()[i] = static_cast<uint8_t>(1 + rng() % 255);
  return b;
}

std::vector<uint8_t> ToHost(const DeviceTensor& t, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  cudaMemcpy(out.data(), t.data, bytes, cudaMemcpyDeviceToHost);
  return out;
}

TEST(DeviceGpuTest, KernelMatchesTheCpuReferenceForEveryTypeAndLayout) {
  for (TensorType type : {TensorType::kFloat32, TensorType::kFloat16, TensorType::kBFloat16, TensorType::kUInt8}) {
    for (TensorLayout layout : {TensorLayout::kNCHW, TensorLayout::kNHWC}) {
      DeviceOptions o;
      o.device = DeviceOptions::Device::kCuda;
      o.type = type;
      o.layout = layout;
      auto stager = DeviceStager::Create(o, nullptr);
      ASSERT_TRUE(stager.ok()) << stager.status();
      Batch batch = MakeBatch((*stager)->host_buffers(), 4, 33, 47, 5);
      ConvertSpec spec;
      spec.n = 4;
      spec.h = 33;
      spec.w = 47;
      spec.type = type;
      spec.layout = layout;
      for (int c = 0; c < 3; ++c) {
        spec.mean[c] = o.mean[c];
        spec.inv_std[c] = 1.0f / o.std[c];
      }
      const size_t bytes = 4 * 33 * 47 * 3 * TensorElementBytes(type);
      std::vector<uint8_t> expected(bytes);
      ConvertOnCpu(batch.data.data(), spec, expected.data());
      auto t = (*stager)->Stage(std::move(batch));
      ASSERT_TRUE(t.ok()) << t.status();
      ASSERT_TRUE((*stager)->Wait(*t).ok());
      const std::vector<uint8_t> got = ToHost(*t, bytes);
      const size_t elements = bytes / TensorElementBytes(type);
      for (size_t i = 0; i < elements; ++i) {
        double a, b;
        if (type == TensorType::kUInt8) {
          ASSERT_EQ(got[i], expected[i]) << i;
        } else if (type == TensorType::kFloat32) {
          a = reinterpret_cast<const float*>(got.data())[i];
          b = reinterpret_cast<const float*>(expected.data())[i];
          ASSERT_NEAR(a, b, 1e-5) << i;
        } else {
          const uint16_t x = reinterpret_cast<const uint16_t*>(got.data())[i];
          const uint16_t y = reinterpret_cast<const uint16_t*>(expected.data())[i];
          ASSERT_LE(std::abs(int{x} - int{y}), 1) << TensorTypeName(type) << " at " << i;  // FMA: at most 1 ulp
        }
      }
    }
  }
}

// MixUp / CutMix in the kernel against the CPU stager's mixing (client/
// mixup_test.cc checks that one against the formula), targets included.
TEST(DeviceGpuTest, MixingInTheKernelMatchesTheCpuStager) {
  MixupOptions mix;
  mix.mixup_alpha = 0.8;
  mix.cutmix_alpha = 1.0;
  mix.mix_prob = 0.8;
  mix.num_classes = 10;
  mix.seed = 3;
  for (TensorType type : {TensorType::kFloat32, TensorType::kFloat16, TensorType::kBFloat16}) {
    for (TensorLayout layout : {TensorLayout::kNCHW, TensorLayout::kNHWC}) {
      DeviceOptions o;
      o.type = type;
      o.layout = layout;
      o.device = DeviceOptions::Device::kCuda;
      auto gpu = DeviceStager::Create(o, nullptr);
      o.device = DeviceOptions::Device::kCpu;
      auto cpu = DeviceStager::Create(o, nullptr);
      ASSERT_TRUE(gpu.ok() && cpu.ok());
      ASSERT_TRUE((*gpu)->SetMixup(mix).ok());
      ASSERT_TRUE((*cpu)->SetMixup(mix).ok());
      for (int b = 0; b < 8; ++b) {
        Batch x = MakeBatch((*gpu)->host_buffers(), 6, 31, 45, static_cast<uint32_t>(b));
        Batch y = MakeBatch((*cpu)->host_buffers(), 6, 31, 45, static_cast<uint32_t>(b));
        for (int i = 0; i < 6; ++i) {
          x.labels.push_back((b + 3 * i) % 10);
          y.labels.push_back((b + 3 * i) % 10);
        }
        x.batch_index = y.batch_index = b;
        auto g = (*gpu)->Stage(std::move(x));
        auto c = (*cpu)->Stage(std::move(y));
        ASSERT_TRUE(g.ok() && c.ok());
        ASSERT_TRUE((*gpu)->Wait(*g).ok());
        std::vector<float> targets(60);
        cudaMemcpy(targets.data(), g->targets, 60 * sizeof(float), cudaMemcpyDeviceToHost);
        for (int i = 0; i < 60; ++i) ASSERT_EQ(targets[i], c->targets[i]) << i;
        const size_t elements = 6 * 31 * 45 * 3;
        const std::vector<uint8_t> got = ToHost(*g, elements * TensorElementBytes(type));
        for (size_t i = 0; i < elements; ++i) {
          if (type == TensorType::kFloat32) {
            ASSERT_NEAR(reinterpret_cast<const float*>(got.data())[i], static_cast<const float*>(c->data)[i], 1e-5)
                << i;
          } else {
            const int a = reinterpret_cast<const uint16_t*>(got.data())[i];
            const int e = static_cast<const uint16_t*>(c->data)[i];
            ASSERT_LE(std::abs(a - e), 2) << TensorTypeName(type) << " at " << i;  // the kernel's FMA: 1 ulp per value
          }
        }
      }
    }
  }
}

TEST(DeviceGpuTest, CopiesOverlapButSlotsAreNotReusedWhileHeld) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCuda;
  o.slots = 2;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok()) << stager.status();
  auto pool = (*stager)->host_buffers();
  auto first = (*stager)->Stage(MakeBatch(pool, 16, 224, 224, 1));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*stager)->Wait(*first).ok());
  const size_t bytes = 16 * 3 * 224 * 224 * 4;
  const std::vector<uint8_t> before = ToHost(*first, bytes);
  // The second batch is staged while the first is still held: different slot,
  // and the first's data stays intact.
  auto second = (*stager)->Stage(MakeBatch(pool, 16, 224, 224, 2));
  ASSERT_TRUE(second.ok());
  EXPECT_NE(first->data, second->data);
  ASSERT_TRUE((*stager)->Wait(*second).ok());
  EXPECT_EQ(ToHost(*first, bytes), before);
  // Events complete in stream order.
  EXPECT_EQ(cudaEventQuery(static_cast<cudaEvent_t>(first->ready_event)), cudaSuccess);
  int64_t copied = 0;
  double seconds = 0;
  first->lease.reset();
  auto third = (*stager)->Stage(MakeBatch(pool, 16, 224, 224, 3));
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE((*stager)->Wait(*third).ok());
  (*stager)->CopyStats(&copied, &seconds);
  EXPECT_EQ(copied, 3 * 16 * 224 * 224 * 3);
  EXPECT_GT(seconds, 0);
}

// The consumer's reads are queued (behind a 300 ms host function) when it
// releases the tensor; the next Stage reuses the only slot and must not
// overwrite it before those reads ran.
TEST(DeviceGpuTest, ASlotIsReusedOnlyAfterTheConsumersQueuedReads) {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCuda;
  o.slots = 1;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok()) << stager.status();
  auto pool = (*stager)->host_buffers();
  cudaStream_t consumer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  auto first = (*stager)->Stage(MakeBatch(pool, 8, 64, 64, 1));
  ASSERT_TRUE(first.ok());
  const size_t bytes = 8 * 3 * 64 * 64 * 4;
  ASSERT_TRUE((*stager)->Wait(*first).ok());
  const std::vector<uint8_t> expected = ToHost(*first, bytes);
  void* snapshot = nullptr;
  ASSERT_EQ(cudaMalloc(&snapshot, bytes), cudaSuccess);
  ASSERT_TRUE((*stager)->HandOver(*first, consumer).ok());
  cudaLaunchHostFunc(
      consumer, [](void*) { usleep(300000); }, nullptr);
  cudaMemcpyAsync(snapshot, first->data, bytes, cudaMemcpyDeviceToDevice, consumer);
  first->Release(consumer);  // reads queued, not done
  auto second = (*stager)->Stage(MakeBatch(pool, 8, 64, 64, 2));
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*stager)->Wait(*second).ok());
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  std::vector<uint8_t> got(bytes);
  cudaMemcpy(got.data(), snapshot, bytes, cudaMemcpyDeviceToHost);
  EXPECT_EQ(got, expected) << "the slot was overwritten before the consumer's queued reads";
  EXPECT_NE(ToHost(*second, bytes), expected);
  cudaFree(snapshot);
  second->Release(nullptr);
  cudaStreamDestroy(consumer);
}

// A CUDA stager and a CPU one with otherwise default options.
std::pair<std::unique_ptr<DeviceStager>, std::unique_ptr<DeviceStager>> GpuAndCpuStagers() {
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCuda;
  auto gpu = DeviceStager::Create(o, nullptr);
  o.device = DeviceOptions::Device::kCpu;
  auto cpu = DeviceStager::Create(o, nullptr);
  if (!gpu.ok() || !cpu.ok()) return {};
  return {*std::move(gpu), *std::move(cpu)};
}

// Audio batches (float32 or int16 [N, C, L], made on the servers) and video
// clips ([N, T, H, W, 3] uint8) reach the GPU with the CPU path's values: audio
// copied as it is, clips converted as N x T images.
TEST(DeviceGpuTest, AudioAndVideoBatchesEqualTheCpuPath) {
  for (const v1::DType dtype : {v1::FLOAT32, v1::INT16}) {
    auto [gpu, cpu] = GpuAndCpuStagers();
    ASSERT_TRUE(gpu && cpu);
    const size_t element = dtype == v1::INT16 ? 2 : 4;
    const size_t bytes = 4 * 2 * 16000 * element;
    auto audio = [&](const std::shared_ptr<HostBufferPool>& pool) {
      Batch b;
      b.layout = v1::AUDIO;
      b.dtype = dtype;
      b.shape = {4, 2, 16000};
      b.data = pool->Get(bytes);
      std::mt19937 rng(7);
      for (size_t i = 0; i < bytes; ++i) b.data.data()[i] = static_cast<uint8_t>(rng());
      return b;
    };
    auto g = gpu->Stage(audio(gpu->host_buffers()));
    auto c = cpu->Stage(audio(cpu->host_buffers()));
    ASSERT_TRUE(g.ok() && c.ok()) << g.status() << c.status();
    ASSERT_TRUE(gpu->Wait(*g).ok());
    EXPECT_EQ(g->shape, (std::vector<int64_t>{4, 2, 16000}));
    const std::vector<uint8_t> got = ToHost(*g, bytes);
    EXPECT_EQ(0, std::memcmp(got.data(), c->data, bytes)) << v1::DType_Name(dtype);
  }
  auto [gpu, cpu] = GpuAndCpuStagers();
  ASSERT_TRUE(gpu && cpu);
  auto clip = [](const std::shared_ptr<HostBufferPool>& pool) {
    Batch b = MakeBatch(pool, 2 * 8, 48, 64, 11);  // 2 clips of 8 frames
    b.shape = {2, 8, 48, 64, 3};
    return b;
  };
  auto g = gpu->Stage(clip(gpu->host_buffers()));
  auto c = cpu->Stage(clip(cpu->host_buffers()));
  ASSERT_TRUE(g.ok() && c.ok()) << g.status() << c.status();
  ASSERT_TRUE(gpu->Wait(*g).ok());
  EXPECT_EQ(g->shape, c->shape);
  const size_t elements = 2 * 8 * 48 * 64 * 3;
  const std::vector<uint8_t> got = ToHost(*g, elements * 4);
  for (size_t i = 0; i < elements; ++i) {
    ASSERT_NEAR(reinterpret_cast<const float*>(got.data())[i], static_cast<const float*>(c->data)[i], 1e-6) << i;
  }
}

TEST(DeviceGpuTest, StagingLeavesTheCallersCurrentDeviceAlone) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (count < 2) GTEST_SKIP() << "needs two GPUs";
  DeviceOptions o;
  o.device = DeviceOptions::Device::kCuda;
  o.gpu = 1;
  auto stager = DeviceStager::Create(o, nullptr);
  ASSERT_TRUE(stager.ok());
  cudaSetDevice(0);
  auto t = (*stager)->Stage(MakeBatch((*stager)->host_buffers(), 2, 8, 8, 1));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->device, 1);
  int current = -1;
  cudaGetDevice(&current);
  EXPECT_EQ(current, 0);
}
#endif

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  const absl::Status usable = stoker::CudaUsable(0);
  if (!usable.ok()) {
    std::printf("SKIPPED: %s\n", std::string(usable.message()).c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
