#include "client/training_loader.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace stoker {

nlohmann::json LoaderStatsJson(const LoaderStats& s) {
  nlohmann::json j;
  j["batches"] = s.run.batches;
  j["images"] = s.run.images;
  j["bytes"] = s.run.bytes;
  j["seconds"] = s.run.seconds;
  j["images_per_second"] = s.run.images_per_second;
  j["megabytes_per_second"] = s.run.megabytes_per_second;
  j["starved_percent"] = s.run.starved_percent;
  j["inter_batch_p50_ms"] = s.run.inter_batch_p50_ms;
  j["inter_batch_p99_ms"] = s.run.inter_batch_p99_ms;
  j["receive_latency_p50_ms"] = s.run.receive_latency_p50_ms;
  j["batches_per_server"] = nlohmann::json::object();
  for (const auto& [server, n] : s.run.batches_per_server) j["batches_per_server"][server] = n;
  j["bottleneck"] = s.verdict.stage;
  j["bottleneck_explanation"] = s.verdict.Explain();
  j["bottleneck_figures"] = {{"starved_ratio", s.verdict.starved_ratio},
                             {"storage_wait_ratio", s.verdict.storage_wait_ratio},
                             {"h2d_ratio", s.verdict.h2d_ratio},
                             {"transfer_seconds_per_batch", s.verdict.transfer_seconds},
                             {"server_seconds_per_batch", s.verdict.server_seconds},
                             {"read_seconds_per_batch", s.verdict.read_seconds},
                             {"compute_seconds_per_batch", s.verdict.compute_seconds}};
  j["device_path"] = s.device_path;
  j["h2d_bytes"] = s.h2d_bytes;
  j["h2d_seconds"] = s.h2d_seconds;
  j["h2d_gb_per_second"] = s.h2d_seconds > 0 ? static_cast<double>(s.h2d_bytes) / 1e9 / s.h2d_seconds : 0.0;
  j["next_seconds"] = s.next_seconds;
  return j;
}

absl::StatusOr<std::unique_ptr<TrainingLoader>> TrainingLoader::Create(LoaderConfig config) {
  if (config.mixup.mixup_alpha != 0 || config.mixup.cutmix_alpha != 0) {  // before connecting
    if (absl::Status s = ValidateMixup(config.mixup); !s.ok()) return s;
  }
  std::unique_ptr<TrainingLoader> loader(new TrainingLoader());
  loader->registry_ = std::make_shared<prometheus::Registry>();
  loader->metrics_ = std::make_unique<ClientMetrics>(*loader->registry_);
  if (config.metrics_port >= 0) {
    auto endpoint = MetricsEndpoint::Start(config.metrics_host, config.metrics_port, loader->registry_);
    if (!endpoint.ok()) return endpoint.status();
    loader->endpoint_ = *std::move(endpoint);
  }
  config.client.buffers_fixed = config.device.host_slots > 0;  // else the pool follows the prefetch depth
  if (config.device.host_slots <= 0) {
    // As many received batches as the client may hold, plus the one being
    // staged and the one being assembled.
    config.device.host_slots = PrefetchDepth(config.client, static_cast<int>(config.client.servers.size())) + 2;
  }
  auto stager = DeviceStager::Create(config.device, loader->metrics_.get());
  if (!stager.ok()) return stager.status();
  loader->stager_ = *std::move(stager);
  config.client.buffers = loader->stager_->host_buffers();
  auto client = StokerClient::Connect(config.client, loader->metrics_.get());
  if (!client.ok()) return client.status();
  loader->client_ = *std::move(client);
  // Without a device, staging is the conversion on the host (issue 12).
  loader->client_->meter().SetDevicePath(loader->stager_->path());
  if (config.mixup.enabled()) {
    if (config.client.session.fields_size() > 0) {
      return absl::InvalidArgumentError(
          "MixUp/CutMix mix (images, labels) batches; this session names fields (drop one or the other)");
    }
    MixupOptions mixup = config.mixup;
    mixup.seed = config.client.session.seed();
    if (mixup.num_classes == 0) mixup.num_classes = loader->client_->dataset().class_names_size();
    if (absl::Status s = loader->stager_->SetMixup(mixup); !s.ok()) return s;
  }
  return loader;
}

TrainingLoader::~TrainingLoader() {
  client_.reset();  // stops the streams before the buffers they fill go away
}

absl::Status TrainingLoader::HandOver(const DeviceTensor& tensor, void* consumer_stream, bool wait) {
  return wait ? stager_->Wait(tensor) : stager_->HandOver(tensor, consumer_stream);
}

absl::StatusOr<bool> TrainingLoader::Next(void* consumer_stream, bool wait, DeviceTensor* out) {
  const absl::Time t0 = absl::Now();
  if (!started_) {
    stats_.Start(t0);
    started_ = true;
  }
  Batch batch;
  bool end = false;
  if (absl::Status s = client_->Next(&batch, &end); !s.ok()) return s;
  if (end) return false;
  const int64_t images = static_cast<int64_t>(batch.sample_indices.size());
  const int64_t bytes = static_cast<int64_t>(batch.data.size());
  const absl::Duration receive_latency = batch.receive_latency;
  const std::string server = batch.server;
  const absl::Time s0 = absl::Now();
  absl::StatusOr<DeviceTensor> tensor = stager_->Stage(std::move(batch));
  if (!tensor.ok()) return tensor.status();
  if (absl::Status s = HandOver(*tensor, consumer_stream, wait); !s.ok()) return s;
  const absl::Time t1 = absl::Now();
  client_->meter().OnH2d(t1 - s0);
  stats_.AddBatch(t1, t1 - t0, images, bytes, receive_latency, server);
  next_seconds_ += absl::ToDoubleSeconds(t1 - t0);
  *out = *std::move(tensor);
  return true;
}

absl::Status TrainingLoader::CacheOneBatch() {
  bool end = false;
  if (absl::Status s = client_->Next(&cached_, &end); !s.ok()) return s;
  if (end) return absl::OutOfRangeError("the running epoch has no batch left to cache");
  return absl::OkStatus();
}

absl::StatusOr<DeviceTensor> TrainingLoader::StageCached(void* consumer_stream, bool wait) {
  if (cached_.shape.empty()) return absl::FailedPreconditionError("no cached batch: call CacheOneBatch first");
  absl::StatusOr<DeviceTensor> tensor = stager_->StageBorrowed(cached_);
  if (!tensor.ok()) return tensor.status();
  if (absl::Status s = HandOver(*tensor, consumer_stream, wait); !s.ok()) return s;
  return tensor;
}

LoaderStats TrainingLoader::Stats() const {
  LoaderStats s;
  s.run = stats_.Finish(absl::Now());
  s.verdict = client_->meter().EvaluateAll();
  s.device_path = stager_->path();
  stager_->CopyStats(&s.h2d_bytes, &s.h2d_seconds);
  s.next_seconds = next_seconds_;
  return s;
}

}  // namespace stoker
