// The client library linked into a training job: connects to data servers,
// plans each epoch from (seed, epoch), pulls the epoch's batches from the
// servers (each server gets new work as it returns finished batches) and
// hands them to the caller in epoch order. Thread-compatible: one training
// loop calls it; internally one reader thread per server stream.
#ifndef STOKER_CLIENT_STOKER_CLIENT_H_
#define STOKER_CLIENT_STOKER_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/batch.h"
#include "client/bottleneck.h"
#include "client/channel_security.h"
#include "client/client_metrics.h"
#include "client/local_producer.h"
#include "client/server_set.h"
#include "common/epoch_plan.h"
#include "proto/stoker/v1/stoker.grpc.pb.h"

namespace stoker {

struct ClientConfig {
  // host:port entries, or one dns:///name:port re-resolved every
  // resolve_interval (servers join and leave as the name's addresses change).
  // Empty: no remote servers (then local.workers must be >= 1).
  std::vector<std::string> servers;
  absl::Duration resolve_interval = absl::Seconds(5);
  // TLS, client certificate and token for the servers (channel_security.h).
  ChannelSecurity security;
  // Local mode (local_producer.h): local.workers threads in this process
  // read, decode and augment too, as one more producer in the same pull
  // scheduling (it takes a batch when it has a free worker). 0: off. With no
  // servers, the client is a complete single-machine loader. The rest of
  // `local` as a server's flags: its data root (its copy must have the
  // servers' fingerprint), its limits (keep them equal to the servers' so that
  // the same samples fail, and are replaced, wherever a batch is made), its
  // own Python transform processes and op plugins (the same modules make the
  // same pixels wherever a batch is made; python.processes 0: one per worker).
  LocalOptions local;
  v1::SessionConfig session;  // dataset, pipeline, batch size, seed...
  bool drop_last = false;     // leave out the epoch's last partial batch
  int rank = 0;               // this process's share of the epoch...
  int world_size = 1;         // ...as PyTorch's DistributedSampler
  bool ordered = true;        // false: hand batches over as they complete
  // Epochs the job runs (0: not known). While an epoch drains, the next
  // one's first batches are requested on the same streams, so that it does
  // not start cold; not after the last of `epochs` (when known, nothing is
  // fetched that the job will not use; when not, at most the prefetch depth
  // of an epoch that never starts).
  int64_t epochs = 0;
  // false: every epoch opens its own streams and starts cold (the behaviour
  // before epochs flowed into each other; kept for comparison).
  bool overlap_epochs = true;
  int window_per_server = 2;  // batches requested from one server at a time
  // Streams to each server, each on its own TCP connection, sharing the
  // server's window: a server sends one connection's bytes on one thread at
  // a time, so two let it use a second core (see docs/transport.md).
  int streams_per_server = 2;
  // Most batches requested or buffered at once (bounds client memory at about
  // prefetch_batches x batch bytes); 0: by time (client/fanout.h): enough to
  // cover how long a batch takes to arrive at the rate the step consumes
  // them, at most prefetch_bytes; without bounded fan-out, 2 x
  // window_per_server x servers.
  int prefetch_batches = 0;
  int64_t prefetch_bytes = int64_t{2} << 30;  // cap of the depth by time; 0: none
  // Bounded fan-out (client/fanout.h): this rank streams from a subset of the
  // servers, sized from its demand and the servers' supply: initial_servers
  // at first, then between min_servers (failover) and max_servers (0: the
  // whole pool); ranks spread evenly over the pool by rendezvous hashing.
  // false: every server in the set (the behaviour before).
  bool bounded_fanout = true;
  int min_servers = 2;
  int initial_servers = 2;  // what a failover needs; more as demand and supply ask (issue 50: 4 made short jobs keep 4)
  int max_servers = 32;
  absl::Duration rpc_timeout = absl::Seconds(10);  // OpenSession and connecting
  // How long Connect waits for servers that are up but still scanning the
  // dataset (a first open of a large tree takes minutes).
  absl::Duration open_timeout = absl::Minutes(30);
  absl::Duration stream_timeout = absl::Hours(24);    // one epoch's stream
  absl::Duration batch_timeout = absl::Seconds(120);  // one batch on one server
  // With no server answering for this long, Next fails naming the servers.
  absl::Duration unavailable_timeout = absl::Seconds(30);
  // Where received batch bytes go; a DeviceStager's host_buffers() (pinned
  // with CUDA). Null: a pool of ordinary memory. Unless buffers_fixed, the
  // client raises the pool to the prefetch depth + 2 blocks as the depth
  // grows (scarce blocks made on the caller's thread, in StartEpoch and
  // Next) and lowers it at StartEpoch to the depth the last run ended at, so
  // that the received batches live in one pool sized by the same bytes as
  // the prefetch (at most prefetch_bytes + 2 batches). A pool given here is
  // resized so too.
  std::shared_ptr<HostBufferPool> buffers;
  bool buffers_fixed = false;  // the pool's size was chosen by the user (DeviceOptions::host_slots)
};

class EpochRun;

// Batches requested or buffered at once when a run starts: prefetch_batches,
// or 2 x window_per_server x the servers used (`servers`, or with bounded
// fan-out at most initial_servers of them), plus 2 x the local producer's
// window (its workers), when that is 0. Host buffers (and the pinned pool,
// DeviceOptions::host_slots) are sized from it, plus 2, and then follow the
// depth by time (ClientConfig::buffers_fixed).
int PrefetchDepth(const ClientConfig& config, int servers);
// This rank's key in the servers' rendezvous order (client/fanout.h): its
// job, rank and world size.
std::string FanoutKey(const ClientConfig& config);
// The local producer's window: batches it holds at once (at least 2, so that
// its workers do not idle at a batch's tail).
int LocalWindow(int local_workers);
// The job name a client gives its sessions when SessionConfig.job is empty:
// $STOKER_JOB; else, under torch.distributed, torch:$MASTER_ADDR:$MASTER_PORT
// (the same for every rank); else host:pid (so that unnamed jobs still get
// their own fair share).
std::string DefaultJobName();

// "global" or "shards" (SessionConfig.shuffle, as the programs' --shuffle and
// the Python loader's shuffle= name it); INVALID_ARGUMENT naming the choices.
absl::StatusOr<v1::ShuffleOrder> ParseShuffleOrder(const std::string& name);

class StokerClient {
 public:
  // Opens the session on the local producer (local.workers), if any, and on
  // every server that answers within rpc_timeout (at least one producer must
  // answer). While every server that answers is still scanning the
  // dataset, asks again (backing off to 1 s, logging what it waits for) for up
  // to open_timeout. A refusal (codes as OpenSession in stoker.proto) is
  // returned with the server's address prepended; servers that disagree on
  // the dataset are FAILED_PRECONDITION. `metrics` may be null.
  static absl::StatusOr<std::unique_ptr<StokerClient>> Connect(ClientConfig config, ClientMetrics* metrics);
  ~StokerClient();

  const v1::OpenSessionResponse& dataset() const { return dataset_; }
  int64_t BatchesPerEpoch() const;

  // Starts streaming epoch `epoch`. Called for the epoch after one that was
  // handed over completely, it continues on the same streams with the batches
  // already requested for it; otherwise any running epoch is abandoned.
  absl::Status StartEpoch(int64_t epoch);
  // Continues an epoch from a saved position: exactly the batches it had not
  // delivered, with the same content. FAILED_PRECONDITION if the position was
  // saved under another dataset, seed, batch size, rank or world size.
  absl::Status Resume(const v1::ClientPosition& position);
  // Where the running epoch stands, to save with a checkpoint.
  v1::ClientPosition Position() const;
  // The bottleneck verdict's inputs and result (see bottleneck.h); the caller
  // reports device staging time to it (OnH2d).
  BottleneckMeter& meter() { return *meter_; }
  // Blocks for the next batch of the epoch, in order. Sets *end_of_epoch and
  // leaves *batch alone once the epoch's batches are all delivered. Errors:
  // FAILED_PRECONDITION without StartEpoch, else the servers' stream errors.
  absl::Status Next(Batch* batch, bool* end_of_epoch);

 private:
  // Each server's OpenSession answer: (capacity in images/s, workers).
  std::map<std::string, std::pair<double, int>> server_capacity_;
  // The pipeline text, dtype and layout, as saved in a position.
  std::string PipelineDescription() const;
  StokerClient(ClientConfig config, ClientMetrics* metrics);
  absl::Status StartEpochSkipping(int64_t epoch, std::set<int64_t> delivered);
  EpochPlan PlanFor(int64_t epoch) const;
  // The servers' shard layout with this session's window when it asks for
  // the shard-aware order; nullopt for the global order.
  std::optional<ShardLayout> Shards() const;
  // With shuffle=shards: FAILED_PRECONDITION unless the producers' shard
  // sizes describe the dataset (naming `producer`, the first that answered).
  // Connect's local producer: made from config_.local, its session
  // opened (the storage wait counted); dataset_ is its answer.
  absl::Status OpenLocal();
  absl::Status CheckShardSizes(const std::string& producer) const;
  // Arms the epoch after `epoch` in the running EpochRun, unless it is past
  // config_.epochs or armed already.
  absl::Status ArmFollowing(int64_t epoch);

  ClientConfig config_;  // set in Connect (expected_fingerprint), then constant
  ClientMetrics* const metrics_;
  std::unique_ptr<ServerSet> servers_;    // null without servers
  std::unique_ptr<LocalProducer> local_;  // null without local.workers; outlives epoch_
  std::unique_ptr<BottleneckMeter> meter_;
  int64_t epoch_number_ = -1;
  v1::OpenSessionResponse dataset_;
  // Recycles batch buffers across batches and epochs (see host_buffer.h).
  std::shared_ptr<HostBufferPool> buffers_;
  // Raises buffers_ to `depth` + 2 blocks (see ClientConfig::buffers), the
  // scarce ones made here, on the caller's thread; StartEpoch lowers it.
  void SizeBuffers(int depth);
  int buffers_sized_for_ = -1;  // the depth SizeBuffers last saw
  std::unique_ptr<EpochRun> epoch_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_STOKER_CLIENT_H_
