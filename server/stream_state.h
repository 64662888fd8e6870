// The state of one BatchStream call, free of gRPC: which requests are
// accepted, which batches are being produced, which chunks wait to be
// written, and when (and with what status) the call ends. The gRPC reactor
// (data_service.cc) is a shim: it feeds events in and carries out the
// returned StreamAction — start a read, write a chunk, open a session, or
// finish — with no lock held. Thread-safe: events arrive from gRPC threads
// (reads, writes, cancellation) and worker threads (finished batches).
//
// Invariants the shim relies on:
// - at most one write is in flight, and the chunk it points to stays valid
//   until OnWriteDone;
// - finish is returned exactly once, and only when no batch is being produced
//   and no session is being opened, so no worker callback runs after it;
// - once finish has been decided, or the stream has failed, no request is
//   accepted any more (review 1.1: a request read while a batch failed was
//   submitted after Finish and its tasks ran on a deleted reactor).
#ifndef STOKER_SERVER_STREAM_STATE_H_
#define STOKER_SERVER_STREAM_STATE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/stream_trailers.h"
#include "dataplane/base/server_metrics.h"
#include "dataplane/sessions/memory_budget.h"
#include "dataplane/sessions/stream_session.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// One chunk to write: the message's fields, and the payload's bytes
// [offset, offset + length) of the batch's shared buffer.
struct OutgoingChunk {
  v1::BatchChunk fields;  // everything but data
  std::shared_ptr<const std::string> payload;
  size_t offset = 0;
  size_t length = 0;
  bool last_of_batch = false;
  int64_t batch_bytes = 0;  // budget the batch holds until this chunk is written
  absl::Time ready_time;
};

struct StreamAction {
  bool read = false;                      // start the next read
  const OutgoingChunk* write = nullptr;   // write this chunk (valid until OnWriteDone)
  std::optional<v1::SessionConfig> open;  // open a session; report with OnSession
  std::optional<absl::Status> finish;     // end the call with this status
  int64_t failed_batch = -1;              // with finish: the batch that failed, if one did
  int64_t failed_epoch = -1;              // ...and its epoch
  bool session_refused = false;           // with finish: the config was refused
};

struct StreamLimits {
  // Batches accepted and not yet fully written, per stream.
  int max_outstanding_batches = 64;
  int64_t chunk_bytes = int64_t{4} << 20;
  // Bytes of those batches (--max-stream-outstanding-bytes); <= 0: no bound.
  int64_t max_outstanding_bytes = 0;
};

class StreamState {
 public:
  using Act = std::function<void(StreamAction)>;
  // `budget` and `metrics` must outlive the state. `act` carries out the
  // actions of events that arrive through a session's callback (a finished
  // batch), on the worker thread that finished it.
  StreamState(StreamLimits limits, MemoryBudget* budget, ServerMetrics* metrics, Act act);
  ~StreamState();

  // The call started: read the first message.
  StreamAction Start();
  // A message arrived (or did not parse).
  StreamAction OnRequest(absl::StatusOr<v1::StreamRequest> request);
  // The client half-closed, or the read failed.
  StreamAction OnReadsDone();
  // The session asked for by StreamAction::open.
  StreamAction OnSession(absl::StatusOr<std::unique_ptr<StreamSession>> session);
  StreamAction OnWriteDone(bool ok);
  StreamAction OnCancel();
  // The server is shutting down: tell the client with a `draining` chunk.
  StreamAction Drain();

 private:
  // A worker finished a batch that holds `bytes` of the budget.
  StreamAction OnBatch(FinishedBatch batch, int64_t bytes);
  // Checks the limits and takes the batch's budget; on OK the caller submits.
  absl::Status Accept(const v1::BatchRequest& request, int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Enqueue(FinishedBatch& batch, int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropOutgoing() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BatchGone(int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StreamAction Decide() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StreamLimits limits_;
  MemoryBudget* const budget_;
  ServerMetrics* const metrics_;
  const Act act_;

  absl::Mutex mu_;
  std::unique_ptr<StreamSession> session_ ABSL_GUARDED_BY(mu_);
  std::deque<OutgoingChunk> outgoing_ ABSL_GUARDED_BY(mu_);
  int producing_ ABSL_GUARDED_BY(mu_) = 0;       // submitted, not yet finished by a worker
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;     // accepted, not yet written or dropped
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // budget this stream holds
  bool opening_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;  // no read will be started again
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // cancelled or a write failed
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool drain_sent_ ABSL_GUARDED_BY(mu_) = false;
  int cache_mode_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int64_t failed_batch_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t failed_epoch_ ABSL_GUARDED_BY(mu_) = -1;
  bool session_refused_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker

#endif  // STOKER_SERVER_STREAM_STATE_H_
