// One epoch in flight: a BatchStream per server, pull-based dispatch of the
// epoch plan's batches (a server gets a new batch when it has fewer than
// `window` outstanding and the client holds fewer than `prefetch` batches in
// total), reassembly of chunks, and in-order delivery. Thread-safe: Next is
// called by the training loop while one reader thread per stream runs; the
// destructor cancels the streams and joins the readers.
#ifndef STOKER_CLIENT_EPOCH_RUN_H_
#define STOKER_CLIENT_EPOCH_RUN_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/batch.h"
#include "client/client_metrics.h"
#include "common/epoch_plan.h"
#include "proto/stoker/v1/stoker.grpc.pb.h"

namespace stoker {

struct EpochRunOptions {
  int window = 2;
  int prefetch = 4;
  absl::Duration stream_timeout = absl::Hours(24);
  std::shared_ptr<HostBufferPool> buffers;  // where batch buffers come from
  int64_t sample_bytes = 0;  // from OpenSession: a batch of n samples has n x this
};

class EpochRun {
 public:
  // Starts one stream per (address, channel) and the first requests.
  // `metrics` (nullable) must outlive the run.
  EpochRun(const v1::SessionConfig& session, EpochPlan plan,
           const std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>>& servers,
           EpochRunOptions options, ClientMetrics* metrics);
  ~EpochRun();

  // See StokerClient::Next.
  absl::Status Next(Batch* batch, bool* end_of_epoch);

 private:
  struct Stream;
  struct Request {
    Stream* stream;
    v1::StreamRequest message;
  };

  void ReadLoop(Stream* stream);
  // Files a batch whose last chunk arrived. Returns new requests to send.
  // DATA_LOSS if the stream was not asked for this batch or its size is off.
  absl::StatusOr<std::vector<Request>> OnBatchReceived(Stream* stream, Batch batch);
  // Picks the next batches to request, within window and prefetch.
  std::vector<Request> Dispatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes requests (outside mu_), and half-closes streams with nothing left.
  void Send(std::vector<Request> requests);

  const EpochPlan plan_;
  const EpochRunOptions options_;
  const std::shared_ptr<HostBufferPool> pool_ = options_.buffers;
  ClientMetrics* const metrics_;
  std::vector<std::unique_ptr<Stream>> streams_;  // constant after construction
  std::atomic<bool> stopping_{false};             // the destructor is cancelling

  absl::Mutex mu_;
  int64_t next_to_dispatch_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_to_deliver_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, Batch> ready_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, absl::Time> requested_at_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_CLIENT_EPOCH_RUN_H_
