// The CUDA path of DeviceStager (see device_stager.h). Built only with
// STOKER_CUDA.
#include <cuda_runtime.h>

#include <deque>

#include "absl/strings/str_cat.h"
#include "client/device/device_stager.h"
#include "client/device/slot_ring.h"
#include "client/device/tensor_convert_cuda.h"
#include "glog/logging.h"

namespace stoker {

absl::StatusOr<ConvertSpec> SpecFor(const Batch& batch, const DeviceOptions& o);
std::vector<int64_t> ShapeOf(const ConvertSpec& s);
std::vector<int64_t> TensorShape(const Batch& batch, const ConvertSpec& s);
Batch TakeOrDescribe(const Batch& source, Batch* owned);

namespace {

absl::Status CudaError(cudaError_t e, const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

// Pinned host memory for received batches, allocated with `device` current
// (review 1.10: a reader thread with no device set used to create a context
// on GPU 0), portable so that any device may copy from it; the calling
// thread's device is restored.
HostAllocator PinnedAllocator(int device) {
  HostAllocator pinned;
  pinned.device = device;
  pinned.scarce = true;
  pinned.allocate = [](size_t size, int gpu) {
    int previous = -1;
    const bool switch_device = cudaGetDevice(&previous) == cudaSuccess && previous != gpu;
    if (switch_device) cudaSetDevice(gpu);
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (switch_device) cudaSetDevice(previous);
    if (e != cudaSuccess) {
      cudaGetLastError();
      LOG(WARNING) << "cudaHostAlloc of " << size << " bytes failed; using pageable memory";
      return new uint8_t[size];  // pageable: slower copies, still correct
    }
    return static_cast<uint8_t*>(p);
  };
  pinned.release = [](uint8_t* data, int) {
    cudaPointerAttributes attrs;
    if (cudaPointerGetAttributes(&attrs, data) == cudaSuccess && attrs.type == cudaMemoryTypeHost) {
      cudaFreeHost(data);
    } else {
      cudaGetLastError();  // clear the error of a pageable pointer
      delete[] data;
    }
  };
  return pinned;
}

// Makes `gpu` current for the scope and restores the caller's device (a
// framework's thread may have another one current).
class DeviceGuard {
 public:
  explicit DeviceGuard(int gpu) {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == gpu) return;
    previous_ = current;  // -1 when unknown: nothing to restore
    cudaSetDevice(gpu);
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

struct Slot {
  uint8_t* input = nullptr;  // device copy of the uint8 batch
  void* output = nullptr;    // converted tensor
  size_t input_bytes = 0, output_bytes = 0;
  float* targets = nullptr;  // MixUp / CutMix soft targets on the device
  size_t targets_bytes = 0;
  std::vector<float> host_targets;              // their host copy, rewritten only by the slot's holder
  cudaEvent_t start = nullptr, done = nullptr;  // timing pair; `done` is the ready event
  cudaEvent_t released = nullptr;               // recorded on the consumer's stream at release
  bool release_recorded = false;                // ordered by the ring's mutex
};

// The stream and the slots, shared with the leases: a tensor released after
// the stager is gone still finds its events, and the memory is freed last.
struct CudaSlots {
  explicit CudaSlots(int gpu) : gpu(gpu) {}
  ~CudaSlots() {
    DeviceGuard guard(gpu);
    if (stream) cudaStreamSynchronize(stream);
    for (Slot& s : slots) {
      if (s.released && s.release_recorded) cudaEventSynchronize(s.released);
      cudaFree(s.input);
      cudaFree(s.output);
      cudaFree(s.targets);
      for (cudaEvent_t e : {s.start, s.done, s.released}) {
        if (e) cudaEventDestroy(e);
      }
    }
    if (stream) cudaStreamDestroy(stream);
  }
  // Slot `index`, created (with its events) on first use. Only the staging
  // thread calls it; the deque keeps references valid as it grows.
  absl::StatusOr<Slot*> Get(size_t index) {
    while (slots.size() <= index) {
      Slot s;
      // Blocking-sync events: a CPU wait sleeps instead of spinning a core.
      if (cudaEventCreateWithFlags(&s.start, cudaEventBlockingSync) != cudaSuccess ||
          cudaEventCreateWithFlags(&s.done, cudaEventBlockingSync) != cudaSuccess ||
          cudaEventCreateWithFlags(&s.released, cudaEventBlockingSync | cudaEventDisableTiming) != cudaSuccess) {
        return absl::InternalError("cudaEventCreate failed");
      }
      slots.push_back(s);
    }
    return &slots[index];
  }

  const int gpu;
  cudaStream_t stream = nullptr;
  std::deque<Slot> slots;
};

class CudaStager final : public DeviceStager {
 public:
  CudaStager(const DeviceOptions& o, ClientMetrics* metrics)
      : options_(o),
        metrics_(metrics),
        ring_(SlotRing::Create(o.slots, o.max_slots, metrics)),
        buffers_(HostBufferPool::Create(o.host_slots, PinnedAllocator(o.gpu))),
        slots_(std::make_shared<CudaSlots>(o.gpu)) {
    type_ = o.type;
  }
  ~CudaStager() override { ring_->DetachMetrics(); }  // tensors may outlive the metrics

  absl::Status Init() {
    DeviceGuard guard(options_.gpu);
    if (cudaError_t e = cudaStreamCreateWithFlags(&slots_->stream, cudaStreamNonBlocking); e != cudaSuccess) {
      return CudaError(e, "cudaStreamCreate");
    }
    for (int i = 0; i < options_.slots; ++i) {
      if (absl::StatusOr<Slot*> s = slots_->Get(static_cast<size_t>(i)); !s.ok()) return s.status();
    }
    if (options_.batch_bytes > 0) buffers_->Reserve(options_.host_slots, options_.batch_bytes);
    if (metrics_) metrics_->DevicePath("cuda").Set(1);
    return absl::OkStatus();
  }

  const char* path() const override { return "cuda"; }
  std::shared_ptr<HostBufferPool> host_buffers() override { return buffers_; }

  absl::StatusOr<DeviceTensor> StageFrom(const Batch& batch, Batch* owned) override {
    absl::StatusOr<ConvertSpec> spec = SpecFor(batch, options_);
    if (!spec.ok()) return spec.status();
    if (spec->raw && mixup_.enabled()) return PrepareMix(batch, &*spec, nullptr);
    DeviceGuard guard(options_.gpu);
    absl::StatusOr<int> index = ring_->Acquire(options_.slot_wait);
    if (!index.ok()) return index.status();
    absl::StatusOr<Slot*> got = slots_->Get(static_cast<size_t>(*index));
    if (!got.ok()) {
      ring_->Release(*index);
      return got.status();
    }
    Slot& slot = **got;
    CollectTimes(&slot);  // before the slot's timing events are recorded again
    if (absl::Status s = PrepareMix(batch, &*spec, &slot.host_targets); !s.ok()) {
      ring_->Release(*index);
      return s;
    }
    // uint8 NHWC needs no conversion: the tensor is the copied input.
    // Audio (raw) is float32 or int16 already: copied, not converted.
    const bool as_is =
        spec->raw || (spec->type == TensorType::kUInt8 && spec->layout == TensorLayout::kNHWC && !spec->mixes());
    const size_t in_bytes = batch.data.size();
    const size_t out_bytes =
        as_is ? 0 : static_cast<size_t>(spec->n * spec->h * spec->w * 3) * TensorElementBytes(spec->type);
    const size_t targets_bytes = slot.host_targets.size() * sizeof(float);
    if (absl::Status s = Ensure(slot, in_bytes, out_bytes, mixup_.enabled() ? targets_bytes : 0); !s.ok()) {
      ring_->Release(*index);
      return s;
    }
    // The consumer released the slot with an event on its stream: the copy
    // below waits on the GPU for the reads queued before it, not on the CPU.
    cudaError_t e = slot.release_recorded ? cudaStreamWaitEvent(slots_->stream, slot.released, 0) : cudaSuccess;
    if (e == cudaSuccess) e = cudaEventRecord(slot.start, slots_->stream);
    if (e == cudaSuccess) {
      e = cudaMemcpyAsync(slot.input, batch.data.data(), in_bytes, cudaMemcpyHostToDevice, slots_->stream);
    }
    if (e == cudaSuccess && !as_is) e = LaunchConvert(slot.input, *spec, slot.output, slots_->stream);
    if (e == cudaSuccess && mixup_.enabled()) {
      e = cudaMemcpyAsync(slot.targets, slot.host_targets.data(), targets_bytes, cudaMemcpyHostToDevice,
                          slots_->stream);
    }
    if (e == cudaSuccess) e = cudaEventRecord(slot.done, slots_->stream);
    if (e != cudaSuccess) {
      cudaStreamSynchronize(slots_->stream);  // the copy may still read the caller's batch
      ring_->Release(*index);
      return CudaError(e, "staging a batch");
    }
    copied_bytes_ += static_cast<int64_t>(in_bytes);
    if (metrics_) metrics_->h2d_bytes->Increment(static_cast<double>(in_bytes));
    pending_times_.push_back(&slot);
    DeviceTensor t;
    t.data = as_is ? static_cast<void*>(slot.input) : slot.output;
    t.shape = TensorShape(batch, *spec);
    t.type = spec->type;
    t.device = options_.gpu;
    if (mixup_.enabled()) {
      t.targets = slot.targets;
      t.targets_shape = {spec->n, mixup_.num_classes};
    }
    t.ready_event = slot.done;
    t.stream = slots_->stream;
    t.batch = TakeOrDescribe(batch, owned);  // an owned source stays alive until the lease ends
    t.lease = std::make_shared<SlotLease>(ring_, *index, [slots = slots_, s = &slot](void* consumer) {
      DeviceGuard guard(slots->gpu);
      // Order the slot's next copy after the consumer's reads, on the GPU.
      s->release_recorded = cudaEventRecord(s->released, static_cast<cudaStream_t>(consumer)) == cudaSuccess;
      // The host batch (freed after this) must outlive its own copy.
      cudaEventSynchronize(s->done);
    });
    return t;
  }

  absl::Status Wait(const DeviceTensor& t) override {
    DeviceGuard guard(options_.gpu);
    const cudaError_t e = cudaEventSynchronize(static_cast<cudaEvent_t>(t.ready_event));
    return e == cudaSuccess ? absl::OkStatus() : CudaError(e, "waiting for a batch");
  }

  absl::Status HandOver(const DeviceTensor& t, void* consumer_stream) override {
    DeviceGuard guard(options_.gpu);
    const cudaError_t e =
        cudaStreamWaitEvent(static_cast<cudaStream_t>(consumer_stream), static_cast<cudaEvent_t>(t.ready_event), 0);
    return e == cudaSuccess ? absl::OkStatus() : CudaError(e, "ordering the consumer's stream after a batch");
  }

  void CopyStats(int64_t* bytes, double* seconds) const override {
    *bytes = copied_bytes_;
    *seconds = copy_seconds_;
  }

 private:
  absl::Status Ensure(Slot& s, size_t in_bytes, size_t out_bytes, size_t targets_bytes) {
    if (s.targets_bytes < targets_bytes) {
      cudaFree(s.targets);
      s.targets = nullptr;
      if (cudaError_t e = cudaMalloc(&s.targets, targets_bytes); e != cudaSuccess) return CudaError(e, "cudaMalloc");
      s.targets_bytes = targets_bytes;
    }
    if (s.input_bytes < in_bytes) {
      cudaFree(s.input);
      s.input = nullptr;
      if (cudaError_t e = cudaMalloc(&s.input, in_bytes); e != cudaSuccess) return CudaError(e, "cudaMalloc");
      s.input_bytes = in_bytes;
    }
    if (s.output_bytes < out_bytes) {
      cudaFree(s.output);
      s.output = nullptr;
      if (cudaError_t e = cudaMalloc(&s.output, out_bytes); e != cudaSuccess) return CudaError(e, "cudaMalloc");
      s.output_bytes = out_bytes;
    }
    return absl::OkStatus();
  }

  // Reads the copy times of finished batches; waits only for `reused`, whose
  // events are about to be recorded again.
  void CollectTimes(Slot* reused) {
    for (auto it = pending_times_.begin(); it != pending_times_.end();) {
      Slot* s = *it;
      if (s == reused) cudaEventSynchronize(s->done);
      if (cudaEventQuery(s->done) != cudaSuccess) {
        ++it;
        continue;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, s->start, s->done);
      copy_seconds_ += ms / 1000.0;
      if (metrics_) metrics_->h2d_seconds->Observe(ms / 1000.0);
      it = pending_times_.erase(it);
    }
  }

  const DeviceOptions options_;
  ClientMetrics* const metrics_;
  std::shared_ptr<SlotRing> ring_;
  std::shared_ptr<HostBufferPool> buffers_;
  std::shared_ptr<CudaSlots> slots_;
  std::deque<Slot*> pending_times_;
  int64_t copied_bytes_ = 0;
  double copy_seconds_ = 0;
};

}  // namespace

absl::Status CudaUsable(int gpu) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat("no usable CUDA device: ", cudaGetErrorString(e)));
  }
  if (gpu < 0 || gpu >= count) {
    return absl::FailedPreconditionError(absl::StrCat("GPU ", gpu, " does not exist (", count, " devices)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceStager>> CreateCudaStager(const DeviceOptions& options, ClientMetrics* metrics) {
  auto stager = std::make_unique<CudaStager>(options, metrics);
  if (absl::Status s = stager->Init(); !s.ok()) return s;
  return std::unique_ptr<DeviceStager>(std::move(stager));
}

}  // namespace stoker
