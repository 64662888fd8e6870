// The data server's core, free of gRPC: validates sessions and turns batch
// requests into finished batches on the worker pool. DataServiceCore is
// thread-safe and outlives every BatchSession it starts; a BatchSession is
// thread-safe and belongs to one stream. RPC semantics: see stoker.proto.
#ifndef STOKER_SERVER_BATCH_SESSION_H_
#define STOKER_SERVER_BATCH_SESSION_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/stoker/v1/stoker.pb.h"
#include "server/dataset.h"
#include "server/pipeline.h"
#include "server/server_metrics.h"
#include "server/worker_pool.h"

namespace stoker {

struct CoreConfig {
  std::filesystem::path data_root = ".";
  int workers = 1;
  // Target size of one streamed chunk; chunks hold whole samples, so a chunk
  // is rounded down to a multiple of the sample size (at least one sample).
  int64_t chunk_bytes = int64_t{1} << 20;
};

// A batch ready to send: the header and the image buffer in chunks of whole
// samples, in order. Chunks are shared and immutable, so a cached batch is
// re-sent and streamed without copying.
struct FinishedBatch {
  v1::BatchHeader header;
  std::vector<std::shared_ptr<const std::string>> chunks;
  absl::Time ready_time;
};

class BatchSession {
 public:
  using DoneCallback = std::function<void(FinishedBatch)>;

  BatchSession(v1::SessionConfig config, std::shared_ptr<const ImageFolderIndex> index,
               Pipeline pipeline, WorkerPool* pool, ServerMetrics* metrics, int64_t chunk_bytes);

  // Checks the request against the session (INVALID_ARGUMENT naming the field
  // and the allowed range) and schedules its samples. On OK, `done` runs
  // exactly once, on a worker thread, with the finished batch; it also runs
  // after Cancel, then with whatever was produced.
  absl::Status Submit(const v1::BatchRequest& request, DoneCallback done);

  // Makes queued samples of this session skip their work.
  void Cancel() { cancelled_.store(true); }

 private:
  struct Job;
  void RunSample(const std::shared_ptr<Job>& job, int64_t slot);
  void Complete(const std::shared_ptr<Job>& job);
  bool TryServeFromCache(const std::shared_ptr<Job>& job);

  // Constant after construction.
  const v1::SessionConfig config_;
  const std::shared_ptr<const ImageFolderIndex> index_;
  const Pipeline pipeline_;
  WorkerPool* const pool_;
  ServerMetrics* const metrics_;
  const int64_t samples_per_chunk_;

  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  // CACHE_BATCH: the first finished batch's chunks and its sample count.
  std::vector<std::shared_ptr<const std::string>> cached_chunks_ ABSL_GUARDED_BY(mu_);
  int64_t cached_samples_ ABSL_GUARDED_BY(mu_) = 0;
};

class DataServiceCore {
 public:
  DataServiceCore(CoreConfig config, ServerMetrics* metrics);

  // Validates `config` and describes its dataset (see OpenSession in
  // stoker.proto for the error codes).
  absl::StatusOr<v1::OpenSessionResponse> OpenSession(const v1::SessionConfig& config);
  // As OpenSession, then a session that produces batches.
  absl::StatusOr<std::unique_ptr<BatchSession>> StartSession(const v1::SessionConfig& config);

  ServerMetrics& metrics() { return *metrics_; }
  int workers() const { return pool_.num_threads(); }

 private:
  struct Prepared {
    Pipeline pipeline;
    std::shared_ptr<const ImageFolderIndex> index;
  };
  // Validates the config and opens its dataset; counts refusals.
  absl::StatusOr<Prepared> Prepare(const v1::SessionConfig& config);

  const CoreConfig config_;
  ServerMetrics* const metrics_;
  DatasetCatalog catalog_;
  WorkerPool pool_;  // last: its threads stop before the rest is destroyed
};

}  // namespace stoker

#endif  // STOKER_SERVER_BATCH_SESSION_H_
