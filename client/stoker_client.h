// The client library linked into a training job: connects to data servers,
// plans each epoch from (seed, epoch), pulls the epoch's batches from the
// servers (each server gets new work as it returns finished batches) and
// hands them to the caller in epoch order. Thread-compatible: one training
// loop calls it; internally one reader thread per server stream.
#ifndef STOKER_CLIENT_STOKER_CLIENT_H_
#define STOKER_CLIENT_STOKER_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/batch.h"
#include "client/client_metrics.h"
#include "proto/stoker/v1/stoker.grpc.pb.h"

namespace stoker {

struct ClientConfig {
  std::vector<std::string> servers;  // host:port
  v1::SessionConfig session;         // dataset, pipeline, batch size, seed...
  bool drop_last = false;            // leave out the epoch's last partial batch
  int window_per_server = 2;         // batches requested from one server at a time
  // Most batches requested or buffered at once (bounds client memory at about
  // prefetch_batches x batch bytes); 0 means window_per_server x servers.
  int prefetch_batches = 0;
  absl::Duration rpc_timeout = absl::Seconds(10);     // OpenSession and connecting
  absl::Duration stream_timeout = absl::Hours(24);    // one epoch's stream
};

class EpochRun;

class StokerClient {
 public:
  // Opens the session on every server. The first server error is returned
  // with the server's address prepended (codes as OpenSession in
  // stoker.proto); UNAVAILABLE / DEADLINE_EXCEEDED when a server cannot be
  // reached within rpc_timeout. `metrics` may be null.
  static absl::StatusOr<std::unique_ptr<StokerClient>> Connect(ClientConfig config, ClientMetrics* metrics);
  ~StokerClient();

  const v1::OpenSessionResponse& dataset() const { return dataset_; }
  int64_t BatchesPerEpoch() const;

  // Starts streaming epoch `epoch` (any running epoch is abandoned).
  absl::Status StartEpoch(int64_t epoch);
  // Blocks for the next batch of the epoch, in order. Sets *end_of_epoch and
  // leaves *batch alone once the epoch's batches are all delivered. Errors:
  // FAILED_PRECONDITION without StartEpoch, else the servers' stream errors.
  absl::Status Next(Batch* batch, bool* end_of_epoch);

 private:
  struct Server {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::DataService::Stub> stub;
  };
  StokerClient(ClientConfig config, ClientMetrics* metrics);

  const ClientConfig config_;
  ClientMetrics* const metrics_;
  std::vector<Server> servers_;
  v1::OpenSessionResponse dataset_;
  // Recycles batch buffers across batches and epochs (see host_buffer.h).
  std::shared_ptr<HostBufferPool> buffers_;
  std::unique_ptr<EpochRun> epoch_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_STOKER_CLIENT_H_
