// A run of epochs in flight: the transport around a BatchScheduler (see
// batch_scheduler.h for the rules: pull scheduling, exactly-once, retries,
// batches that fail everywhere, timeouts, the next epoch armed while the
// current one drains). EpochRun owns one gRPC stream per live server, kept
// across the epochs of the run, driven by gRPC's callback API (public API only: a generic
// stub, so that chunks arrive as raw bytes and the payload is copied once),
// and a supervisor thread that ticks the scheduler. Every scheduler call is
// made under mu_; gRPC operations are started with mu_ released.
//
// Thread-safe: Next is called by the training loop while gRPC's threads
// deliver reads and writes; the destructor cancels the streams and waits for
// each to be done.
#ifndef STOKER_CLIENT_EPOCH_RUN_H_
#define STOKER_CLIENT_EPOCH_RUN_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/batch.h"
#include "client/batch_scheduler.h"
#include "client/bottleneck.h"
#include "client/client_metrics.h"
#include "client/local_producer.h"
#include "client/server_set.h"
#include "common/clock.h"
#include "common/epoch_plan.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct EpochRunOptions {
  SchedulerOptions scheduler;
  absl::Duration stream_timeout = absl::Hours(24);
  std::shared_ptr<HostBufferPool> buffers;  // where batch buffers come from
  BottleneckMeter* meter = nullptr;         // fed with waits and batch times (nullable)
  Clock* clock = nullptr;                   // null: SteadyClock
};

class EpochRun {
 public:
  // `servers`, `local` and `metrics` (each nullable; servers or local must
  // be set) must outlive the run. The local producer is one more member of
  // the set, named kLocalProducer, with in-process "streams" (LocalStream).
  EpochRun(const v1::SessionConfig& session, EpochPlan plan, ServerSet* servers, LocalProducer* local,
           EpochRunOptions options, ClientMetrics* metrics);
  ~EpochRun();

  // See StokerClient::Next (the current epoch's batches).
  absl::Status Next(Batch* batch, bool* end_of_epoch);
  // The current epoch's delivered batches: all below *next, plus *beyond.
  void Position(int64_t* next, std::vector<int64_t>* beyond) const;
  // Arms the epoch after the last armed one (see BatchScheduler::ArmEpoch):
  // its batches are requested on the same streams once the epochs before it
  // have all theirs requested.
  absl::Status Arm(EpochPlan plan);
  // Moves to the next armed epoch once the current one is handed over.
  bool CanAdvance() const;
  absl::Status Advance();
  int64_t epoch() const;
  int64_t last_armed_epoch() const;
  // Batches requested or buffered at most now (the fan-out's depth by time).
  int prefetch() const;

 private:
  class Stream;
  class GrpcStream;
  class LocalStream;
  friend class GrpcStream;
  friend class LocalStream;

  void Supervise();
  void OpenStreams();
  // Builds and sends the scheduler's requests, and half-closes what it says.
  void Send(std::vector<Assignment> assignments, std::vector<StreamId> half_closes);
  // Stream callbacks (gRPC threads).
  absl::Status CheckHeader(StreamId id, const v1::BatchHeader& header);
  absl::Status OnBatch(StreamId id, Batch batch);
  void OnDraining(StreamId id);
  // `retry_after` > 0 with a RESOURCE_EXHAUSTED refusal: the server is full.
  void OnStreamDone(StreamId id, const absl::Status& status, bool from_server, int64_t failed_batch,
                    int64_t failed_epoch, bool session_refused, absl::Duration retry_after = absl::ZeroDuration());

  const v1::SessionConfig session_;
  ServerSet* const servers_;
  LocalProducer* const local_;
  const EpochRunOptions options_;
  Clock* const clock_;
  ClientMetrics* const metrics_;
  absl::Notification stop_;
  std::thread supervisor_;

  mutable absl::Mutex mu_;
  BatchScheduler scheduler_ ABSL_GUARDED_BY(mu_);
  std::map<StreamId, std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);  // every stream opened
};

}  // namespace stoker

#endif  // STOKER_CLIENT_EPOCH_RUN_H_
