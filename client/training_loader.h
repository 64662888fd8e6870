// What a training process links to get batches as tensors: the client
// (StokerClient), the device stager, the run's statistics and bottleneck
// verdict, and optionally a Prometheus /metrics endpoint, in one object. The
// Python package `stoker` (python/) is a thin binding over it.
//
// Thread-compatible: one training loop calls it. The tensors it returns may
// be released from any thread and may outlive the loader (see
// device_stager.h).
#ifndef STOKER_CLIENT_TRAINING_LOADER_H_
#define STOKER_CLIENT_TRAINING_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/bottleneck.h"
#include "client/device/device_stager.h"
#include "client/run_stats.h"
#include "client/stoker_client.h"
#include "common/metrics_endpoint.h"
#include "nlohmann/json.hpp"

namespace stoker {

struct LoaderConfig {
  ClientConfig client;   // servers, session, rank, window, timeouts...
  DeviceOptions device;  // where batches go and in which type and layout
  // MixUp / CutMix on the staged batches (client/device/mixup.h): off unless an
  // alpha is set. seed comes from the session; num_classes 0 takes the
  // dataset's class count. Batches then carry DeviceTensor::targets.
  MixupOptions mixup;
  int metrics_port = -1;  // /metrics port: -1 none, 0 a free one
  std::string metrics_host = "0.0.0.0";
};

struct LoaderStats {
  RunSummary run;           // since the first batch (starved: time inside Next)
  Verdict verdict;          // the bottleneck verdict over the whole run
  std::string device_path;  // "cuda" or "cpu"
  int64_t h2d_bytes = 0;    // copied to the device (CPU path: converted)
  double h2d_seconds = 0;   // copy + conversion time
  double next_seconds = 0;  // total time the caller spent inside Next
};
// The stats as one JSON object, the one list of their names: Python's
// Loader.stats() (through the binding) and the C API's
// stoker_client_stats_json give these keys.
nlohmann::json LoaderStatsJson(const LoaderStats& s);

class TrainingLoader {
 public:
  // Creates the stager (host buffers sized from the prefetch depth when
  // config.device.host_slots is 0), connects (see StokerClient::Connect) and
  // starts the metrics endpoint when asked.
  static absl::StatusOr<std::unique_ptr<TrainingLoader>> Create(LoaderConfig config);
  ~TrainingLoader();

  const v1::OpenSessionResponse& dataset() const { return client_->dataset(); }
  int64_t BatchesPerEpoch() const { return client_->BatchesPerEpoch(); }
  int metrics_port() const { return endpoint_ ? endpoint_->port() : -1; }
  const char* device_path() const { return stager_->path(); }

  absl::Status StartEpoch(int64_t epoch) { return client_->StartEpoch(epoch); }
  absl::Status Resume(const v1::ClientPosition& position) { return client_->Resume(position); }
  v1::ClientPosition Position() const { return client_->Position(); }

  // The running epoch's next batch, staged: false at the end of the epoch.
  // On CUDA, work queued afterwards on `consumer_stream` (null: the legacy
  // default stream) sees the batch ready, or with `wait` the CPU waits.
  absl::StatusOr<bool> Next(void* consumer_stream, bool wait, DeviceTensor* out);

  // The diagnosis's host-cached step: keeps the running epoch's next batch in
  // host memory, then stages that same batch again on each StageCached.
  absl::Status CacheOneBatch();
  absl::StatusOr<DeviceTensor> StageCached(void* consumer_stream, bool wait);

  LoaderStats Stats() const;

 private:
  TrainingLoader() = default;
  absl::Status HandOver(const DeviceTensor& tensor, void* consumer_stream, bool wait);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ClientMetrics> metrics_;
  std::unique_ptr<MetricsEndpoint> endpoint_;
  std::unique_ptr<DeviceStager> stager_;
  std::unique_ptr<StokerClient> client_;
  RunStats stats_;
  bool started_ = false;
  double next_seconds_ = 0;
  Batch cached_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_TRAINING_LOADER_H_
