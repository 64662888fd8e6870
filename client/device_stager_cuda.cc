// The CUDA path of DeviceStager (see device_stager.h). Built only with
// STOKER_CUDA.
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "client/device_stager.h"
#include "client/slot_ring.h"
#include "client/tensor_convert_cuda.h"
#include "glog/logging.h"

namespace stoker {

absl::StatusOr<ConvertSpec> SpecFor(const Batch& batch, const DeviceOptions& o);
std::vector<int64_t> ShapeOf(const ConvertSpec& s);
Batch TakeOrDescribe(const Batch& source, Batch* owned);

namespace {

absl::Status CudaError(cudaError_t e, const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

// Pinned host memory for received batches.
const HostAllocator& PinnedAllocator() {
  static const HostAllocator pinned = {
      [](size_t size) {
        void* p = nullptr;
        if (cudaHostAlloc(&p, size, cudaHostAllocDefault) != cudaSuccess) {
          LOG(WARNING) << "cudaHostAlloc of " << size << " bytes failed; using pageable memory";
          return new uint8_t[size];  // pageable: slower copies, still correct
        }
        return static_cast<uint8_t*>(p);
      },
      [](uint8_t* data) {
        cudaPointerAttributes attrs;
        if (cudaPointerGetAttributes(&attrs, data) == cudaSuccess && attrs.type == cudaMemoryTypeHost) {
          cudaFreeHost(data);
        } else {
          cudaGetLastError();  // clear the error of a pageable pointer
          delete[] data;
        }
      }};
  return pinned;
}

struct Slot {
  uint8_t* input = nullptr;  // device copy of the uint8 batch
  void* output = nullptr;    // converted tensor
  size_t input_bytes = 0, output_bytes = 0;
  cudaEvent_t start = nullptr, done = nullptr;
};

class CudaStager final : public DeviceStager {
 public:
  CudaStager(const DeviceOptions& o, ClientMetrics* metrics)
      : options_(o),
        metrics_(metrics),
        ring_(SlotRing::Create(o.slots)),
        buffers_(HostBufferPool::Create(o.host_slots, PinnedAllocator())),
        slots_(static_cast<size_t>(o.slots)) {}

  ~CudaStager() override {
    cudaSetDevice(options_.gpu);
    cudaStreamSynchronize(stream_);
    for (Slot& s : slots_) {
      cudaFree(s.input);
      cudaFree(s.output);
      if (s.start) cudaEventDestroy(s.start);
      if (s.done) cudaEventDestroy(s.done);
    }
    if (stream_) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    if (cudaError_t e = cudaSetDevice(options_.gpu); e != cudaSuccess) return CudaError(e, "cudaSetDevice");
    if (cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); e != cudaSuccess) {
      return CudaError(e, "cudaStreamCreate");
    }
    for (Slot& s : slots_) {
      if (cudaEventCreate(&s.start) != cudaSuccess || cudaEventCreate(&s.done) != cudaSuccess) {
        return absl::InternalError("cudaEventCreate failed");
      }
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
    // The caller's thread may have another device current (frameworks switch).
    if (cudaError_t e = cudaSetDevice(options_.gpu); e != cudaSuccess) return CudaError(e, "cudaSetDevice");
    CollectTimes();
    const int index = ring_->Acquire(metrics_);
    Slot& slot = slots_[static_cast<size_t>(index)];
    // The slot was released by its consumer; its previous copy finished too
    // (the lease waited on `done`), so its buffers can be overwritten.
    const size_t in_bytes = batch.data.size();
    const size_t out_bytes = static_cast<size_t>(spec->n * spec->h * spec->w * 3) * TensorElementBytes(spec->type);
    if (absl::Status s = Ensure(slot, in_bytes, out_bytes); !s.ok()) {
      ring_->Release(index, metrics_);
      return s;
    }
    cudaEventRecord(slot.start, stream_);
    cudaError_t e = cudaMemcpyAsync(slot.input, batch.data.data(), in_bytes, cudaMemcpyHostToDevice, stream_);
    if (e == cudaSuccess) e = LaunchConvert(slot.input, *spec, slot.output, stream_);
    if (e == cudaSuccess) e = cudaEventRecord(slot.done, stream_);
    if (e != cudaSuccess) {
      ring_->Release(index, metrics_);
      return CudaError(e, "staging a batch");
    }
    copied_bytes_ += static_cast<int64_t>(in_bytes);
    if (metrics_) metrics_->h2d_bytes->Increment(static_cast<double>(in_bytes));
    pending_times_.push_back(index);
    DeviceTensor t;
    t.data = slot.output;
    t.shape = ShapeOf(*spec);
    t.type = spec->type;
    t.ready_event = slot.done;
    t.stream = stream_;
    t.batch = TakeOrDescribe(batch, owned);  // an owned source stays alive until the lease ends
    cudaEvent_t done = slot.done;
    t.lease = std::make_shared<SlotLease>(ring_, index, metrics_, [done] { cudaEventSynchronize(done); });
    return t;
  }

  absl::Status Wait(const DeviceTensor& t) override {
    cudaSetDevice(options_.gpu);
    const cudaError_t e = cudaEventSynchronize(static_cast<cudaEvent_t>(t.ready_event));
    return e == cudaSuccess ? absl::OkStatus() : CudaError(e, "waiting for a batch");
  }

  void CopyStats(int64_t* bytes, double* seconds) const override {
    *bytes = copied_bytes_;
    *seconds = copy_seconds_;
  }

 private:
  absl::Status Ensure(Slot& s, size_t in_bytes, size_t out_bytes) {
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

  // Reads the copy times of finished batches (no waiting).
  void CollectTimes() {
    while (!pending_times_.empty()) {
      Slot& s = slots_[static_cast<size_t>(pending_times_.front())];
      if (cudaEventQuery(s.done) != cudaSuccess) break;
      float ms = 0;
      cudaEventElapsedTime(&ms, s.start, s.done);
      copy_seconds_ += ms / 1000.0;
      if (metrics_) metrics_->h2d_seconds->Observe(ms / 1000.0);
      pending_times_.erase(pending_times_.begin());
    }
  }

  const DeviceOptions options_;
  ClientMetrics* const metrics_;
  std::shared_ptr<SlotRing> ring_;
  std::shared_ptr<HostBufferPool> buffers_;
  std::vector<Slot> slots_;
  cudaStream_t stream_ = nullptr;
  std::vector<int> pending_times_;
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
