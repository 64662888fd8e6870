// The data service's core, without gRPC: validates sessions against the
// catalog's datasets, owns what the server's sessions share (the worker pool,
// the memory budget, admission, the batch cache, user ops, tokenizers) and
// starts BatchSessions. The gRPC shim (server/data_service.h) and local mode
// (client/local_producer.h) drive it.
#ifndef STOKER_DATAPLANE_SESSIONS_DATA_SERVICE_CORE_H_
#define STOKER_DATAPLANE_SESSIONS_DATA_SERVICE_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dataplane/sessions/batch_session.h"

namespace stoker {

// OK unless `source` is a materialised dataset whose stored prefix is not
// where `pipeline` begins: FAILED_PRECONDITION naming both.
absl::Status CheckStoredPrefix(const std::string& dataset, const SampleSource& source, const Pipeline& pipeline);

// OK unless the session's fields cannot be served: INVALID_ARGUMENT from
// CheckFields (names, kinds, limits), FAILED_PRECONDITION with a cache mode or
// a materialising session.
absl::Status CheckSessionFields(const v1::SessionConfig& config, int64_t max_field_bytes);

class DataServiceCore {
 public:
  // Starts the Python stage and loads the op plugins the config names:
  // INVALID_ARGUMENT naming a module that does not import or a plugin that
  // does not load.
  static absl::StatusOr<std::unique_ptr<DataServiceCore>> Create(CoreConfig config, ServerMetrics* metrics);
  // Without user ops, or with those given.
  DataServiceCore(CoreConfig config, ServerMetrics* metrics, UserOps user = {});

  using SessionOrError = absl::StatusOr<std::unique_ptr<BatchSession>>;

  using OpenDone = std::function<void(absl::StatusOr<v1::OpenSessionResponse>)>;

  // Validates `config` and describes its dataset (see OpenSession in
  // stoker.proto for the error codes), calling `done` once: at once, or on
  // the catalog's scan or timer thread. Never blocks the calling thread. When
  // the dataset is still being scanned after `patience`: UNAVAILABLE for
  // which IsStillOpening() holds (the scan goes on; ask again).
  void OpenSessionAsync(const v1::SessionConfig& config, absl::Duration patience, OpenDone done);
  // As OpenSession, then a session that produces batches; waits for a scan.
  SessionOrError StartSession(const v1::SessionConfig& config);
  // As StartSession, but calls `done` once, at once or on the catalog's scan
  // thread when the dataset is open (never blocks the calling thread).
  void StartSessionAsync(const v1::SessionConfig& config, std::function<void(SessionOrError)> done);
  // Shutting down: sessions waiting for a dataset scan get UNAVAILABLE.
  void StopOpening() { catalog_.Stop(); }

  ServerMetrics& metrics() { return *metrics_; }
  MemoryBudget& budget() { return budget_; }
  int max_outstanding_batches() const { return config_.max_outstanding_batches; }
  int64_t chunk_bytes() const { return config_.chunk_bytes; }
  int64_t max_stream_bytes() const { return config_.max_stream_bytes; }
  int workers() const { return pool_.num_threads(); }

 private:
  struct Prepared {
    Pipeline pipeline;
    std::shared_ptr<const SampleSource> source;
    std::optional<StoredFormat> store;           // a materialising session's format (SessionConfig.store)
    std::shared_ptr<const Tokenizer> tokenizer;  // SessionConfig.tokenizer
  };
  using PreparedDone = std::function<void(absl::StatusOr<Prepared>)>;
  // Checks the opened (or failed) dataset against the config; counts refusals.
  absl::StatusOr<Prepared> Prepare(const v1::SessionConfig& config, Pipeline pipeline,
                                   std::optional<StoredFormat> store, SourceOrError source);
  // Validates the config's pipeline, opens its dataset (waiting for a scan up
  // to `patience`) and calls `done` once with Prepare's answer: what the
  // OpenSession call and a stream's session open share.
  void PrepareAsync(const v1::SessionConfig& config, absl::Duration patience, PreparedDone done);

  const CoreConfig config_;
  ServerMetrics* const metrics_;
  const UserOps user_;
  DatasetCatalog catalog_;
  FailureLog failure_log_;
  MemoryBudget budget_;
  Admission admission_;
  std::unique_ptr<BatchCache> batch_cache_;  // null: --batch-cache-bytes 0
  TokenizerCache tokenizers_;
  WorkerPool pool_;  // last: its threads stop before the rest is destroyed
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SESSIONS_DATA_SERVICE_CORE_H_
