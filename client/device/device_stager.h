// The GPU side of the client: takes received batches (uint8 NHWC in host
// memory) to the device as tensors. With CUDA, batch bytes arrive in pinned
// host buffers (host_buffers() is handed to the client, so the one copy of
// the payload lands there), go to the GPU with cudaMemcpyAsync on a dedicated
// stream, and a kernel converts them (uint8 -> float32/float16/bfloat16, or
// uint8 in another layout; NCHW or NHWC; per-channel mean/std) into a device
// slot; an event per batch tells the consumer when it is ready, so the next
// batch's copy overlaps the current training step. Without a usable device
// the CPU fallback offers the same API: host memory stands in for device
// memory and the conversion runs on the CPU with the same results.
//
// Thread-compatible: one training loop calls Stage; tensors may be released
// from any thread. A DeviceTensor holds its slot until released: the slot's
// next copy is queued behind an event recorded, at release, on the consumer's
// stream (DeviceTensor::Release, or set_consumer_stream on the lease), so a
// tensor may be released as soon as the reads of it are queued, without
// waiting for them. Slots and their memory live until the last tensor is
// released, even after the stager is destroyed.
#ifndef STOKER_CLIENT_DEVICE_DEVICE_STAGER_H_
#define STOKER_CLIENT_DEVICE_DEVICE_STAGER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/batch.h"
#include "client/client_metrics.h"
#include "client/device/host_buffer.h"
#include "client/device/mixup.h"
#include "client/device/tensor_convert.h"

namespace stoker {

struct DeviceOptions {
  enum class Device { kAuto, kCuda, kCpu };
  Device device = Device::kAuto;  // kCuda without a usable GPU is an error
  TensorType type = TensorType::kFloat32;
  TensorLayout layout = TensorLayout::kNCHW;
  bool normalize = true;  // ImageNet mean/std unless given
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
  int slots = 3;  // device buffers allocated at first (tensors alive at once)
  // While the caller holds every slot, the ring grows up to max_slots (0: no
  // growth), then Stage waits up to slot_wait for a release before it fails
  // with RESOURCE_EXHAUSTED.
  int max_slots = 0;
  absl::Duration slot_wait = absl::InfiniteDuration();
  int host_slots = 6;      // pinned host buffers kept (prefetch + 2 is right)
  size_t batch_bytes = 0;  // uint8 bytes of a full batch, to pre-allocate
  int gpu = 0;             // CUDA device ordinal
  // Test only: extra time per Stage on the CPU path, to simulate a slow
  // host-to-device copy (a labelled simulation for the bottleneck tests).
  absl::Duration test_h2d_delay = absl::ZeroDuration();
};

// "auto", "cuda" or "cpu"; INVALID_ARGUMENT names the value otherwise.
absl::StatusOr<DeviceOptions::Device> ParseDevice(absl::string_view name);

class SlotLease;

// One converted batch. `data` is device memory on the CUDA path (host memory
// on the CPU path); on CUDA, wait for `ready_event` (a cudaEvent_t) on your
// stream before reading it (cudaStreamWaitEvent, or DeviceStager::HandOver),
// and release the tensor on the stream that reads it.
struct DeviceTensor {
  DeviceTensor() = default;
  DeviceTensor(DeviceTensor&&) = default;
  // Ends the old lease (which waits for its copy) before the old batch's
  // bytes can go back to the pool.
  DeviceTensor& operator=(DeviceTensor&& other) noexcept {
    if (this != &other) {
      lease.reset();
      data = other.data;
      shape = std::move(other.shape);
      type = other.type;
      device = other.device;
      ready_event = other.ready_event;
      stream = other.stream;
      batch = std::move(other.batch);
      targets = other.targets;
      targets_shape = std::move(other.targets_shape);
      lease = std::move(other.lease);
    }
    return *this;
  }

  // Gives the slot back once the work queued so far on `consumer_stream` (a
  // cudaStream_t; null: the legacy default stream) has run; the CPU does not
  // wait for it. Destroying the tensor releases on the lease's stream.
  void Release(void* consumer_stream);
  // The stream used when the tensor is destroyed without Release (e.g. by a
  // DLPack deleter).
  void set_consumer_stream(void* consumer_stream);

  void* data = nullptr;
  std::vector<int64_t> shape;  // {N, 3, H, W} or {N, H, W, 3}
  int device = -1;             // CUDA device ordinal; -1 on the CPU path
  TensorType type = TensorType::kFloat32;
  void* ready_event = nullptr;  // cudaEvent_t; null on the CPU path
  void* stream = nullptr;       // cudaStream_t the copy ran on; null on CPU
  Batch batch;                  // labels, indices...; its image bytes stay until the copy finished
  // With MixUp / CutMix (DeviceStager::SetMixup): the soft targets, float32
  // [N, num_classes], on the same device as `data` and ready with it.
  float* targets = nullptr;
  std::vector<int64_t> targets_shape;
  std::shared_ptr<SlotLease> lease;  // declared after batch: destroyed (and waited on) first
};

class DeviceStager {
 public:
  // Picks the path: kAuto uses CUDA when built with it and a device answers,
  // else the CPU (logged once); kCuda without a usable device is
  // FAILED_PRECONDITION saying why. `metrics` may be null.
  static absl::StatusOr<std::unique_ptr<DeviceStager>> Create(const DeviceOptions& options, ClientMetrics* metrics);
  virtual ~DeviceStager() = default;

  virtual const char* path() const = 0;  // "cuda" or "cpu"
  // Buffers for the client's received batches (ClientConfig::buffers).
  virtual std::shared_ptr<HostBufferPool> host_buffers() = 0;
  // Starts the copy and conversion of a uint8 NHWC batch and returns at once
  // (CUDA) or when done (CPU). Blocks only while every slot is in use.
  absl::StatusOr<DeviceTensor> Stage(Batch batch) { return StageFrom(batch, &batch); }
  // As Stage, but the caller keeps `batch` alive and unchanged until the
  // tensor is released (the diagnosis re-stages one cached host batch).
  absl::StatusOr<DeviceTensor> StageBorrowed(const Batch& batch) { return StageFrom(batch, nullptr); }
  // Blocks until `tensor` is ready (for callers without their own stream).
  virtual absl::Status Wait(const DeviceTensor& tensor) = 0;
  // Makes work queued later on `consumer_stream` (a cudaStream_t; null: the
  // legacy default stream) wait for `tensor` to be ready, without blocking
  // the CPU. A no-op on the CPU path.
  virtual absl::Status HandOver(const DeviceTensor& tensor, void* consumer_stream) = 0;

  // Host-to-device figures so far: bytes, seconds of copy time.
  virtual void CopyStats(int64_t* bytes, double* seconds) const = 0;

  // Mixes every batch staged from now on (client/mixup.h), fused into the
  // conversion: the CUDA kernel on a GPU, the CPU otherwise. The tensors
  // then carry soft targets. INVALID_ARGUMENT for bad settings, num_classes
  // < 1, or a uint8 tensor type (mixing needs float images).
  absl::Status SetMixup(const MixupOptions& mixup);

 protected:
  // With mixing on: the batch's draw into `spec` and its soft targets into
  // `targets` (resized); INVALID_ARGUMENT for a label outside the classes.
  absl::Status PrepareMix(const Batch& batch, ConvertSpec* spec, std::vector<float>* targets) const;
  MixupOptions mixup_;                      // mixup_.enabled(): on
  TensorType type_ = TensorType::kFloat32;  // the tensors' type (DeviceOptions::type)

  // Stages `source`; when `owned` is set, the tensor takes it over (keeping
  // its bytes alive until the copy finished).
  virtual absl::StatusOr<DeviceTensor> StageFrom(const Batch& source, Batch* owned) = 0;
};

// Why CUDA cannot be used here, or OK if it can (built with CUDA and a device
// answers).
absl::Status CudaUsable(int gpu);

}  // namespace stoker

#endif  // STOKER_CLIENT_DEVICE_DEVICE_STAGER_H_
