// The client's local mode: the data-plane core (dataplane/, no gRPC) run in
// the training process, so that the training host's idle cores make batches
// too. To the scheduler it is one more producer, named kLocalProducer, that
// takes a batch when it has a free worker (its window is its worker count);
// it makes exactly the bytes a data server makes for the same request
// (sample i of epoch e draws only from (seed, e, i)). Its batches count as
// the CPU stage in the bottleneck verdict: they carry the same stage times
// as a server's, and no network time. Thread-safe.
#ifndef STOKER_CLIENT_LOCAL_PRODUCER_H_
#define STOKER_CLIENT_LOCAL_PRODUCER_H_

#include <cstdint>
#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dataplane/base/server_metrics.h"
#include "dataplane/sessions/data_service_core.h"
#include "prometheus/registry.h"
#include "proto/stoker/v1/stoker.pb.h"
#include "storage/store_mirror.h"

namespace stoker {

// The scheduler's name for the local producer (it is not a host:port).
inline constexpr char kLocalProducer[] = "local";

struct LocalOptions {
  int workers = 0;  // threads that read, decode and augment; >= 1 to create
  // Where dataset names resolve, as a server's --data-root: a directory, or
  // s3:// or http(s):// (each dataset copied whole into the cache that
  // STOKER_CACHE_DIR names, see storage/remote_root.h).
  std::string data_root = ".";
  int64_t max_pixels = 100'000'000;                    // as stoker-server --max-pixels
  int64_t max_file_bytes = int64_t{256} << 20;         // as stoker-server --max-file-bytes
  absl::Duration sample_delay = absl::ZeroDuration();  // test-only, as --test-sample-delay-ms
  // The training host's own Python transform processes (as stoker-server
  // --python-transforms; processes 0: one per worker) and op plugins.
  PythonStageConfig python = {{}, 0};
  std::filesystem::path op_plugins;
};

class LocalProducer {
 public:
  // INVALID_ARGUMENT for fewer than one worker, a data root that is neither
  // a directory nor a store URL, a Python module that does not import or a
  // plugin that does not load.
  static absl::StatusOr<std::unique_ptr<LocalProducer>> Create(const LocalOptions& options);
  ~LocalProducer();

  // As a server's OpenSession (the same checks and error codes); waits up to
  // `timeout` for a first scan of the dataset.
  absl::StatusOr<v1::OpenSessionResponse> Open(const v1::SessionConfig& config, absl::Duration timeout);
  // A session that makes batches on this producer's workers (StreamSession:
  // Submit's callback runs on a worker thread).
  absl::StatusOr<std::unique_ptr<StreamSession>> StartSession(const v1::SessionConfig& config);

  int workers() const { return core_->workers(); }
  // Seconds opens spent listing and copying datasets from a remote data
  // root's store (0 for a local one): the verdict's storage wait.
  double storage_wait_seconds() const;

 private:
  LocalProducer();

  // The producer's own metrics, in a registry no endpoint serves: the
  // client's metrics count its batches (server="local").
  prometheus::Registry registry_;
  ServerMetrics metrics_;
  std::unique_ptr<StoreMirror> mirror_;  // a remote data root's store and cache; outlives core_
  std::unique_ptr<DataServiceCore> core_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_LOCAL_PRODUCER_H_
