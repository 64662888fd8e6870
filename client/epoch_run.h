// One epoch in flight. The client owns the epoch plan; servers are stateless.
// Work is pulled: each live server stream may hold `window` requested
// batches, and a server gets a new batch when it returns one, so fast servers
// do more. The client holds at most `prefetch` batches requested or buffered
// (the batch the caller waits for is always requested, so the limit never
// stalls the epoch). A server that fails (stream error, reset, deadline,
// UNAVAILABLE, a batch outstanding for longer than batch_timeout) has its
// outstanding batches put back and requested from the others, and is retried
// with exponential backoff and jitter. Content depends only on (seed, epoch,
// sample), so a re-requested batch is byte-identical; each batch is delivered
// once. If no server answers for `unavailable_timeout`, Next fails naming them.
//
// Thread-safe: Next is called by the training loop while one reader thread
// per stream and a supervisor thread run; the destructor cancels the streams
// and joins the threads.
#ifndef STOKER_CLIENT_EPOCH_RUN_H_
#define STOKER_CLIENT_EPOCH_RUN_H_

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/batch.h"
#include "client/bottleneck.h"
#include "client/client_metrics.h"
#include "client/server_set.h"
#include "common/epoch_plan.h"
#include "proto/stoker/v1/stoker.grpc.pb.h"

namespace stoker {

struct EpochRunOptions {
  int window = 2;
  int prefetch = 4;
  bool ordered = true;  // false: hand batches over as they complete
  absl::Duration stream_timeout = absl::Hours(24);
  absl::Duration batch_timeout = absl::Seconds(120);
  absl::Duration unavailable_timeout = absl::Seconds(30);
  absl::Duration reconnect_min = absl::Milliseconds(100);
  absl::Duration reconnect_max = absl::Seconds(2);
  std::shared_ptr<HostBufferPool> buffers;  // where batch buffers come from
  int64_t sample_bytes = 0;                 // from OpenSession
  std::set<int64_t> already_delivered;      // resume: batches not to fetch again
  BottleneckMeter* meter = nullptr;         // fed with waits and batch times (nullable)
};

class EpochRun {
 public:
  // `servers` and `metrics` (nullable) must outlive the run.
  EpochRun(const v1::SessionConfig& session, EpochPlan plan, ServerSet* servers, EpochRunOptions options,
           ClientMetrics* metrics);
  ~EpochRun();

  // See StokerClient::Next.
  absl::Status Next(Batch* batch, bool* end_of_epoch);
  // The delivered batches: all below *next, plus *beyond.
  void Position(int64_t* next, std::vector<int64_t>* beyond) const;

 private:
  struct Stream;
  struct ServerState {
    Stream* live = nullptr;  // the open stream, if any
    int failures = 0;        // in a row
    absl::Time retry_at = absl::InfinitePast();
    std::string last_error;
  };
  struct Request {
    Stream* stream;
    v1::StreamRequest message;
  };

  void Supervise();
  void OpenStreams();
  void ReadLoop(Stream* stream);
  // The stream ended (status) or must be given up: put its batches back.
  void Retire(Stream* stream, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<Request>> OnBatchReceived(Stream* stream, Batch batch);
  std::vector<Request> Dispatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Send(std::vector<Request> requests);
  // Half-closes `stream` if it has nothing outstanding and gets nothing more.
  void MaybeHalfClose(Stream* stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const v1::SessionConfig session_;
  const EpochPlan plan_;
  ServerSet* const servers_;
  const EpochRunOptions options_;
  ClientMetrics* const metrics_;
  absl::Notification stop_;
  std::thread supervisor_;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);  // every stream opened, live or not
  std::map<std::string, ServerState> server_state_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> pending_ ABSL_GUARDED_BY(mu_);                 // not yet requested, lowest first
  std::map<int64_t, Stream*> assigned_ ABSL_GUARDED_BY(mu_);       // requested, on this stream
  std::map<int64_t, absl::Time> requested_at_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Batch> ready_ ABSL_GUARDED_BY(mu_);            // received, not yet handed over
  std::set<int64_t> delivered_ ABSL_GUARDED_BY(mu_);               // handed over (or before a resume)
  int64_t next_to_deliver_ ABSL_GUARDED_BY(mu_) = 0;                 // lowest not delivered
  absl::Time no_server_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_CLIENT_EPOCH_RUN_H_
