#include "client/device/device_stager.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/device/slot_ring.h"
#include "glog/logging.h"

namespace stoker {

absl::StatusOr<DeviceOptions::Device> ParseDevice(absl::string_view name) {
  if (name == "auto") return DeviceOptions::Device::kAuto;
  if (name == "cuda") return DeviceOptions::Device::kCuda;
  if (name == "cpu") return DeviceOptions::Device::kCpu;
  return absl::InvalidArgumentError(absl::StrCat("device '", name, "'; expected auto, cuda or cpu"));
}

absl::StatusOr<ConvertSpec> SpecFor(const Batch& batch, const DeviceOptions& o) {
  if (batch.layout == v1::AUDIO) {
    uint64_t elements = batch.shape.empty() ? 0 : 1;
    for (int64_t d : batch.shape) {
      const bool fits = d > 0 && static_cast<uint64_t>(d) <= (uint64_t{1} << 40) / std::max<uint64_t>(1, elements);
      elements = fits ? elements * static_cast<uint64_t>(d) : 0;
    }
    const uint64_t element = batch.dtype == v1::INT16 ? 2 : 4;
    if ((batch.dtype != v1::FLOAT32 && batch.dtype != v1::INT16) || batch.shape.size() < 2 ||
        elements * element != batch.data.size()) {
      return absl::InvalidArgumentError(absl::StrCat("audio batch ", batch.batch_index, " of ", batch.data.size(),
                                                     " bytes: its shape and dtype do not describe them"));
    }
    ConvertSpec s;
    s.raw = true;
    s.n = batch.shape[0];
    s.type = batch.dtype == v1::INT16 ? TensorType::kInt16 : TensorType::kFloat32;
    return s;
  }
  // Images [N, H, W, 3]; video clips [N, T, H, W, 3] or [N, K, T, H, W, 3],
  // converted as N x T (x K) images.
  const size_t dims = batch.shape.size();
  if (batch.dtype != v1::UINT8 || batch.layout != v1::NHWC || dims < 4 || dims > 6 || batch.shape[dims - 1] != 3) {
    return absl::InvalidArgumentError(
        "staging needs uint8 NHWC RGB batches from the servers (the conversion to float happens here)");
  }
  // The shape must describe exactly the bytes there are (review 1.7: a
  // shape larger than the buffer made the conversion read past it).
  constexpr int64_t kMaxSide = int64_t{1} << 20;
  int64_t n = 1;
  for (size_t d = 0; d + 3 < dims; ++d) {
    if (batch.shape[d] < 1 || batch.shape[d] > kMaxSide || n > kMaxSide) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch ", batch.batch_index, ": dimension ", d, " is ", batch.shape[d]));
    }
    n *= batch.shape[d];
  }
  const int64_t h = batch.shape[dims - 3], w = batch.shape[dims - 2];
  if (n < 1 || h < 1 || w < 1 || n > kMaxSide || h > kMaxSide || w > kMaxSide ||
      static_cast<uint64_t>(n) * static_cast<uint64_t>(h) * static_cast<uint64_t>(w) * 3 != batch.data.size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch.batch_index, " of shape [", n, ",", h, ",", w,
                                                   ",3] does not match its ", batch.data.size(), " bytes"));
  }
  ConvertSpec s;
  s.n = n;
  s.h = h;
  s.w = w;
  s.type = o.type;
  s.layout = o.layout;
  for (int c = 0; c < 3; ++c) {
    s.mean[c] = o.normalize ? o.mean[c] : 0.0f;
    s.inv_std[c] = o.normalize ? 1.0f / o.std[c] : 1.0f;
  }
  return s;
}

Batch TakeOrDescribe(const Batch& source, Batch* owned) {
  if (owned) return std::move(*owned);
  Batch b;  // everything but the image bytes, which stay with the caller
  b.epoch = source.epoch;
  b.batch_index = source.batch_index;
  b.sample_indices = source.sample_indices;
  b.labels = source.labels;
  b.shape = source.shape;
  b.layout = source.layout;
  b.dtype = source.dtype;
  b.server = source.server;
  b.stage_times = source.stage_times;
  b.failed_samples = source.failed_samples;
  b.receive_latency = source.receive_latency;
  b.fields = source.fields;  // small: the values travel in field_data
  b.field_data = source.field_data;
  return b;
}

std::vector<int64_t> ShapeOf(const ConvertSpec& s) {
  if (s.layout == TensorLayout::kNCHW) return {s.n, 3, s.h, s.w};
  return {s.n, s.h, s.w, 3};
}

std::vector<int64_t> TensorShape(const Batch& batch, const ConvertSpec& s) {
  if (s.raw) return batch.shape;
  // The batch's leading dimensions (N, or N, T for video clips), then one
  // image in the tensor's layout.
  std::vector<int64_t> shape(batch.shape.begin(), batch.shape.end() - 3);
  const std::vector<int64_t> image = ShapeOf(s);
  shape.insert(shape.end(), image.begin() + 1, image.end());
  return shape;
}

absl::Status DeviceStager::SetMixup(const MixupOptions& mixup) {
  if (absl::Status s = ValidateMixup(mixup); !s.ok()) return s;
  if (mixup.num_classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MixUp/CutMix: num_classes = ", mixup.num_classes, "; the soft targets need at least one class"));
  }
  if (type_ == TensorType::kUInt8) {
    return absl::InvalidArgumentError(
        "MixUp and CutMix mix float images: ask for dtype float32, float16 or bfloat16, not uint8");
  }
  mixup_ = mixup;
  return absl::OkStatus();
}

absl::Status DeviceStager::PrepareMix(const Batch& batch, ConvertSpec* spec, std::vector<float>* targets) const {
  if (!mixup_.enabled()) return absl::OkStatus();
  if (spec->raw) return absl::InvalidArgumentError("MixUp and CutMix mix images; this session's batches are audio");
  if (batch.labels.size() != static_cast<size_t>(spec->n)) {
    return absl::InvalidArgumentError(absl::StrCat("MixUp/CutMix: batch ", batch.batch_index, " has ",
                                                   batch.labels.size(), " labels for ", spec->n, " images"));
  }
  if (absl::Status s = CheckLabels(batch.labels, mixup_.num_classes); !s.ok()) return s;
  const MixDraw draw = DrawMix(mixup_, batch.epoch, batch.batch_index, spec->h, spec->w);
  spec->cutmix = draw.cutmix;
  if (draw.cutmix) {
    std::copy(draw.box, draw.box + 4, spec->box);
  } else {
    spec->mix_self = static_cast<float>(draw.lam);
    spec->mix_other = static_cast<float>(1.0 - draw.lam);
  }
  targets->resize(batch.labels.size() * static_cast<size_t>(mixup_.num_classes));
  SoftTargets(mixup_, draw, batch.labels, targets->data());
  return absl::OkStatus();
}

void DeviceTensor::Release(void* consumer_stream) {
  set_consumer_stream(consumer_stream);
  *this = DeviceTensor();
}

void DeviceTensor::set_consumer_stream(void* consumer_stream) {
  if (lease) lease->set_consumer_stream(consumer_stream);
}

namespace {

// The fallback's output buffers, shared with the leases so that a tensor
// outlives the stager. Slot i is touched only by the holder of slot i.
struct CpuOutputs {
  struct Slot {
    std::vector<uint8_t> tensor;
    std::vector<float> targets;  // MixUp / CutMix soft targets
  };
  absl::Mutex mu;  // guards the deque's growth, not the buffers
  std::deque<Slot> buffers ABSL_GUARDED_BY(mu);
  Slot& Get(size_t slot) {
    absl::MutexLock lock(&mu);
    while (buffers.size() <= slot) buffers.emplace_back();
    return buffers[slot];  // deque: references stay valid as it grows
  }
};

// Host buffers stand in for device memory; the conversion runs here. A uint8
// NHWC batch is handed over as it arrived (no copy, no slot).
class CpuStager final : public DeviceStager {
 public:
  CpuStager(const DeviceOptions& o, ClientMetrics* metrics)
      : options_(o),
        metrics_(metrics),
        ring_(SlotRing::Create(o.slots, o.max_slots, metrics)),
        buffers_(HostBufferPool::Create(o.host_slots)),
        outputs_(std::make_shared<CpuOutputs>()) {
    type_ = o.type;
    if (o.batch_bytes > 0) buffers_->Reserve(o.host_slots, o.batch_bytes);
    if (metrics_) metrics_->DevicePath("cpu").Set(1);
  }
  ~CpuStager() override { ring_->DetachMetrics(); }  // tensors may outlive the metrics

  const char* path() const override { return "cpu"; }
  std::shared_ptr<HostBufferPool> host_buffers() override { return buffers_; }

  absl::StatusOr<DeviceTensor> StageFrom(const Batch& batch, Batch* owned) override {
    absl::StatusOr<ConvertSpec> spec = SpecFor(batch, options_);
    if (!spec.ok()) return spec.status();
    const absl::Time t0 = absl::Now();
    if (spec->raw && mixup_.enabled()) return PrepareMix(batch, &*spec, nullptr);
    if (owned &&
        (spec->raw || (spec->type == TensorType::kUInt8 && spec->layout == TensorLayout::kNHWC && !mixup_.enabled()))) {
      if (options_.test_h2d_delay > absl::ZeroDuration()) absl::SleepFor(options_.test_h2d_delay);
      DeviceTensor t;
      t.shape = TensorShape(batch, *spec);
      t.type = spec->type;
      t.batch = std::move(*owned);
      t.data = t.batch.data.data();  // the received bytes themselves
      Count(t.batch.data.size(), absl::Now() - t0);
      return t;
    }
    absl::StatusOr<int> slot = ring_->Acquire(options_.slot_wait);
    if (!slot.ok()) return slot.status();
    CpuOutputs::Slot& buffers = outputs_->Get(static_cast<size_t>(*slot));
    if (absl::Status s = PrepareMix(batch, &*spec, &buffers.targets); !s.ok()) {
      ring_->Release(*slot);
      return s;
    }
    std::vector<uint8_t>& out = buffers.tensor;
    if (options_.test_h2d_delay > absl::ZeroDuration()) absl::SleepFor(options_.test_h2d_delay);
    // A tensor this process cannot allocate (an address-space or memory
    // limit) ends the caller's run with a status, not std::terminate.
    try {
      if (spec->raw) {  // a borrowed audio batch: copied as it is
        out.assign(batch.data.data(), batch.data.data() + batch.data.size());
      } else {
        out.resize(static_cast<size_t>(spec->n * spec->h * spec->w * 3) * TensorElementBytes(spec->type));
        ConvertOnCpu(batch.data.data(), *spec, out.data());
      }
    } catch (const std::bad_alloc&) {
      ring_->Release(*slot);
      return absl::ResourceExhaustedError(absl::StrCat(
          "this process cannot allocate the tensor of batch ", batch.batch_index, " (",
          spec->n * spec->h * spec->w * 3 * static_cast<int64_t>(TensorElementBytes(spec->type)),
          " bytes): out of memory (an address-space, data or cgroup limit); ask for smaller batches or fewer in "
          "flight"));
    }
    Count(batch.data.size(), absl::Now() - t0);
    DeviceTensor t;
    t.data = out.data();
    t.shape = TensorShape(batch, *spec);
    t.type = spec->type;
    if (mixup_.enabled()) {
      t.targets = buffers.targets.data();
      t.targets_shape = {spec->n, mixup_.num_classes};
    }
    t.batch = TakeOrDescribe(batch, owned);
    // The lease keeps the output buffers alive for as long as the tensor.
    t.lease = std::make_shared<SlotLease>(ring_, *slot, [keep = outputs_](void*) {});
    return t;
  }

  absl::Status Wait(const DeviceTensor&) override { return absl::OkStatus(); }
  absl::Status HandOver(const DeviceTensor&, void*) override { return absl::OkStatus(); }

  void CopyStats(int64_t* bytes, double* seconds) const override {
    *bytes = copied_bytes_;
    *seconds = copy_seconds_;
  }

 private:
  const DeviceOptions options_;
  ClientMetrics* const metrics_;
  std::shared_ptr<SlotRing> ring_;
  std::shared_ptr<HostBufferPool> buffers_;
  void Count(size_t bytes, absl::Duration took) {
    const double seconds = absl::ToDoubleSeconds(took);
    copied_bytes_ += static_cast<int64_t>(bytes);
    copy_seconds_ += seconds;
    if (metrics_) {
      metrics_->h2d_seconds->Observe(seconds);
      metrics_->h2d_bytes->Increment(static_cast<double>(bytes));
    }
  }

  std::shared_ptr<CpuOutputs> outputs_;
  int64_t copied_bytes_ = 0;
  double copy_seconds_ = 0;
};

}  // namespace

#ifdef STOKER_HAVE_CUDA
absl::StatusOr<std::unique_ptr<DeviceStager>> CreateCudaStager(const DeviceOptions& options, ClientMetrics* metrics);
#else
absl::Status CudaUsable(int gpu) {
  return absl::FailedPreconditionError("this build has no CUDA support (configured with STOKER_CUDA=OFF or no nvcc)");
}
#endif

absl::StatusOr<std::unique_ptr<DeviceStager>> DeviceStager::Create(const DeviceOptions& options,
                                                                   ClientMetrics* metrics) {
  if (options.slots < 1 || options.host_slots < 1 || options.max_slots < 0) {
    return absl::InvalidArgumentError(absl::StrCat("slots = ", options.slots, ", host_slots = ", options.host_slots,
                                                   ", max_slots = ", options.max_slots,
                                                   "; slots and host_slots must be >= 1, max_slots >= 0"));
  }
  if (options.device != DeviceOptions::Device::kCpu) {
    const absl::Status usable = CudaUsable(options.gpu);
    if (usable.ok()) {
#ifdef STOKER_HAVE_CUDA
      auto cuda = CreateCudaStager(options, metrics);
      if (cuda.ok()) LOG(INFO) << "device path: cuda (GPU " << options.gpu << ", pinned host buffers)";
      return cuda;
#endif
    }
    if (options.device == DeviceOptions::Device::kCuda) {
      return absl::FailedPreconditionError(absl::StrCat("--device cuda: ", usable.message()));
    }
    LOG(INFO) << "device path: cpu (" << usable.message() << ")";
  } else {
    LOG(INFO) << "device path: cpu (asked for)";
  }
  return std::unique_ptr<DeviceStager>(new CpuStager(options, metrics));
}

}  // namespace stoker
