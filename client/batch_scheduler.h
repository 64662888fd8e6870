// The client's scheduling of a run of epochs as a plain core, free of gRPC
// and of threads: which batches are pending, requested (on which stream),
// received and delivered; per-server windows; reassignment when a stream
// ends; timeouts; batches that fail everywhere; draining; servers joining and
// leaving. Epochs flow into each other: the next epoch can be armed while the
// current one is handed over, and its first batches are then requested on
// the same streams as soon as the current epoch's are all out, so that an
// epoch's first batch is not a cold start. Time is passed in (from an
// injected Clock), so every rule can be driven deterministically; EpochRun is
// the transport that feeds it events from real streams.
//
// Rules:
// - Pull: each live server holds at most `window` requested batches, spread
//   over its `streams_per_server` streams (each on its own TCP connection, so
//   that the server's sending is not bound to one core); a new batch goes to
//   the least-loaded live server, on its least-loaded stream. At most `prefetch` batches are
//   requested or buffered (over all armed epochs), except that the batch an
//   ordered caller waits for is always requested. Batches are requested in
//   order: the current epoch's, then the next one's.
// - Exactly once: a batch is requested on one live stream at a time; one
//   that arrives on a stream it was not requested from is refused (the stream
//   is then given up); a batch is handed over once.
// - A stream that ends, fails, or holds a batch past `batch_timeout` is
//   retired: its batches go back to pending and its server is retried with
//   exponential backoff and jitter. While it backs off, the server's other
//   streams finish what they have but get nothing new; streams of one server
//   failing together count as one failure.
// - A batch that the server refuses for what it is (DATA_LOSS, e.g. a bad
//   sample under the FAIL policy; INVALID_ARGUMENT; NOT_FOUND;
//   PERMISSION_DENIED; FAILED_PRECONDITION) on `poison_servers` distinct
//   servers (or on every server there is, if fewer) ends the epoch with that
//   error; so does a batch attempted `max_attempts` times for any reason.
//   The error ends the run (every armed epoch).
// - No live server for `unavailable_timeout`: the epoch ends UNAVAILABLE
//   naming each server and its last error. A server that refuses as full
//   (StreamEnd::ServerFull) answered: the run waits for room.
//
// Thread-compatible: EpochRun serializes every call under its own lock.
#ifndef STOKER_CLIENT_BATCH_SCHEDULER_H_
#define STOKER_CLIENT_BATCH_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/batch.h"
#include "client/fanout.h"
#include "common/epoch_plan.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

class BottleneckMeter;
struct ClientMetrics;

struct SchedulerOptions {
  int window = 2;              // batches requested from one server at a time
  int streams_per_server = 1;  // streams (lanes) opened to each server
  // Producers with their own window and lanes instead (the client's local
  // producer: its worker count, one lane).
  struct Limits {
    int window = 1;
    int lanes = 1;
  };
  std::map<std::string, Limits> producer_limits;
  int prefetch = 4;
  // Bounded fan-out (client/fanout.h): the rank streams from a subset of the
  // servers sized by its demand, and prefetches by time (fanout's own
  // fixed_prefetch, or by time, replaces `prefetch`). Unset: every server in
  // the set gets streams, and `prefetch` holds.
  std::optional<FanoutOptions> fanout;
  bool ordered = true;  // false: hand batches over as they complete
  absl::Duration batch_timeout = absl::Seconds(120);
  absl::Duration unavailable_timeout = absl::Seconds(30);
  absl::Duration reconnect_min = absl::Milliseconds(100);
  absl::Duration reconnect_max = absl::Seconds(2);
  // A stream that stays open this long counts as a live server even before
  // its first batch; one that fails sooner does not.
  absl::Duration proven_after = absl::Seconds(2);
  absl::Duration refused_retry = absl::Seconds(30);
  int poison_servers = 3;
  int max_attempts = 8;
  // What every batch must look like (from OpenSession).
  int64_t sample_bytes = 0;
  std::vector<int64_t> sample_shape;
  // A materialising session (SessionConfig.store): samples differ in size;
  // each header's sample_sizes must add up to its total_bytes instead.
  bool variable_samples = false;
  // SessionConfig.fields without the image: each header's FieldData must
  // match them (common/field_layout.h).
  std::vector<v1::FieldSpec> value_fields;
  int64_t max_sample_field_bytes = 0;   // MaxSampleFieldBytes of the session
  std::set<int64_t> already_delivered;  // resume: batches not to fetch again
  // The run's last epoch, if known: once its batches are all received, the
  // streams are half-closed. -1: not known; streams stay open (idle) while
  // another epoch may be armed, until the run is dropped.
  int64_t final_epoch = -1;
  uint64_t jitter_seed = 0;  // 0: random
};

using StreamId = int64_t;

struct Assignment {
  StreamId stream;
  int64_t epoch;
  int64_t batch;
};

// How a stream ended, as its transport saw it: one event for the scheduler
// (BatchScheduler::OnStreamEnded), made by one of the four constructors.
struct StreamEnd {
  enum class Kind {
    kEnded,           // closed or failed: the batches outstanding go elsewhere
    kSessionRefused,  // the server refused the session itself
    kServerFull,      // the server is full (its --max-sessions or --max-streams)
    kLocalFailure,    // this process could not take a batch the stream sent
  };
  // `status`: the stream's final status; `from_server`: the status is the
  // server's own answer (not a cancellation or a check of ours);
  // `failed_batch`: the batch the server named as the cause (-1: none named,
  // then every batch outstanding on the stream shares the blame), of
  // `failed_epoch` (-1: the oldest outstanding batch of that index).
  static StreamEnd Ended(absl::Status status, bool from_server, int64_t failed_batch = -1, int64_t failed_epoch = -1) {
    return {Kind::kEnded, std::move(status), from_server, failed_batch, failed_epoch, absl::ZeroDuration()};
  }
  // Another copy of the dataset (FAILED_PRECONDITION naming both
  // fingerprints): the stream's batches go elsewhere with no blame; the
  // server gets no work for `refused_retry` and is named in a log line and a
  // metric.
  static StreamEnd SessionRefused(absl::Status status) {
    return {Kind::kSessionRefused, std::move(status), false, -1, -1, absl::ZeroDuration()};
  }
  // The stream's batches go elsewhere with no blame and no attempt counted,
  // the server is not counted as failed (no backoff growth) and gets no new
  // stream for `retry_after` (the server's hint).
  static StreamEnd ServerFull(absl::Status status, absl::Duration retry_after) {
    return {Kind::kServerFull, std::move(status), false, -1, -1, retry_after};
  }
  // The batch's buffer could not be allocated (an address-space or memory
  // limit): no server is to blame and asking again would fail the same way,
  // so the run ends with `status` (RESOURCE_EXHAUSTED naming the size).
  static StreamEnd LocalFailure(absl::Status status) {
    return {Kind::kLocalFailure, std::move(status), false, -1, -1, absl::ZeroDuration()};
  }

  Kind kind = Kind::kEnded;
  absl::Status status;
  bool from_server = false;
  int64_t failed_batch = -1;
  int64_t failed_epoch = -1;
  absl::Duration retry_after;
};

// What the scheduler counted, for tests and metrics.
struct SchedulerCounts {
  int64_t reassigned = 0;  // batches given back to pending when their stream ended
  // Batches of the shard-aware order given to their window's preferred
  // server, and to another one (busy, gone, or refused it).
  int64_t affinity_hits = 0;
  int64_t affinity_misses = 0;
};

class BatchScheduler {
 public:
  // Starts with `plan`'s epoch armed and current (options.already_delivered
  // are its batches not to fetch again). `metrics` and `meter` (nullable) must
  // outlive the scheduler; the meter is fed each received batch's stage times
  // and latency.
  BatchScheduler(EpochPlan plan, SchedulerOptions options, ClientMetrics* metrics, BottleneckMeter* meter = nullptr);

  // --- epochs ---
  // Arms the epoch after the last armed one: its batches become pending
  // (requested after every batch of the epochs before it). INVALID_ARGUMENT
  // if `plan` is not that epoch or has another number of batches.
  absl::Status ArmEpoch(EpochPlan plan);
  // The epoch being handed over, and the last one armed.
  int64_t epoch() const { return plans_.front().epoch(); }
  int64_t last_armed_epoch() const { return plans_.back().epoch(); }
  // The current epoch was handed over completely, without error, and the
  // next one is armed: AdvanceEpoch may be called.
  bool CanAdvance() const;
  // Makes the next armed epoch the current one (FAILED_PRECONDITION unless
  // CanAdvance).
  absl::Status AdvanceEpoch();
  // The sample indices of batch `batch` of armed epoch `epoch`.
  std::vector<int64_t> SampleIndices(int64_t epoch, int64_t batch) const;

  // --- membership and streams ---
  // The servers now in the set. Live streams of servers that left are
  // drained (no new work; they finish what they have). Returns the servers
  // that should get a new stream now, each once per stream it lacks.
  std::vector<std::string> OnMembership(const std::vector<std::string>& addresses, absl::Time now);
  // A server could not be reached (for the unavailable error's message).
  void OnConnectFailed(const std::string& address, const std::string& why);
  // The lane (0 .. streams_per_server - 1) the next stream opened to
  // `address` takes: the lowest one without a live stream. Each lane is its
  // own connection (ServerSet::Channel).
  int FreeLane(const std::string& address) const;
  // A stream to `address` was opened, on FreeLane(address).
  StreamId OnStreamOpened(const std::string& address, absl::Time now);
  int lane(StreamId stream) const { return streams_.at(stream).lane; }
  // The server said it is shutting down: no new work on this stream.
  void OnDraining(StreamId stream);
  // The stream ended (StreamEnd says how and who is to blame).
  void OnStreamEnded(StreamId stream, const StreamEnd& end, absl::Time now);

  // --- batches ---
  // Requests to send now.
  std::vector<Assignment> Dispatch(absl::Time now);
  // Checks a batch's header when it starts arriving, before any buffer is
  // allocated: requested on this stream, an armed epoch, the plan's sample
  // indices, one label per sample, the session's shape and byte count.
  // An error means the stream must be given up.
  absl::Status CheckHeader(StreamId stream, const v1::BatchHeader& header) const;
  // A whole batch arrived (its header passed CheckHeader). An error means the
  // stream must be given up.
  absl::Status OnBatchReceived(StreamId stream, Batch batch, absl::Time now);

  // --- periodic ---
  // Streams holding a batch past batch_timeout (to cancel: they are retired
  // already), and the unavailable check.
  std::vector<StreamId> Tick(absl::Time now);
  // Streams with nothing more to do, to half-close (each returned once).
  std::vector<StreamId> TakeHalfCloses();

  // --- the caller ---
  // True when Take would not wait: a batch, the end, or an error.
  bool CanTake() const;
  // Hands over the current epoch's next batch. *end_of_epoch once every one
  // of its batches was handed over; the run's error if it failed.
  absl::Status Take(Batch* batch, bool* end_of_epoch);
  bool Done() const;  // every armed batch received or delivered
  // The current epoch's delivered batches: all below *next, plus *beyond.
  void Position(int64_t* next, std::vector<int64_t>* beyond) const;
  const absl::Status& error() const { return error_; }

  // Takes what is still requested or buffered off the client's gauges (the
  // epoch is being dropped).
  void ReleaseGauges();

  // --- fan-out and counts ---
  // The servers that get new work now (with fan-out, the chosen subset; else
  // every member) and the prefetch depth in batches.
  std::vector<std::string> ServersInUse() const;
  int prefetch() const { return fanout_ ? fanout_->prefetch() : options_.prefetch; }
  // The bounded fan-out (options.fanout set), else null. Its inputs come
  // from the transport: the rank's demand (Fanout::SetDemand; with a meter,
  // Tick reads it from the meter instead), the servers' capacities as they
  // reported them, and how long the caller waited for a batch (OnWait).
  Fanout* fanout() { return fanout_ ? &*fanout_ : nullptr; }
  const Fanout* fanout() const { return fanout_ ? &*fanout_ : nullptr; }
  const SchedulerCounts& counts() const { return counts_; }

 private:
  struct Stream {
    std::string address;
    int lane = 0;
    std::set<int64_t> requested;  // requested here, not yet received
    bool retired = false;
    bool draining = false;
    bool half_closed = false;
    absl::Time opened;
    bool proven = false;        // delivered a batch (or stayed up for proven_after)
    int64_t last_assigned = 0;  // Dispatch's counter when it last got a batch (0: never)
  };
  struct Server {
    std::vector<StreamId> live;  // at most streams_per_server, one per lane
    int failures = 0;            // in a row
    absl::Time retry_at = absl::InfinitePast();
    // Full (StreamEnd::ServerFull): no new stream before this; live lanes keep their
    // work, and the server counts as answering for the unavailable check.
    absl::Time full_until = absl::InfinitePast();
    std::string last_error;
    bool member = false;  // in the set now
    bool chosen = true;   // in this rank's subset (fan-out): gets new streams and work
  };
  struct Attempts {
    int count = 0;
    std::map<std::string, absl::Status> refused_by;  // server -> its batch error
    std::map<std::string, int> timers_by;            // server -> its timer failures of the batch
  };

  // Batches are numbered across the run: seq = (epoch - first epoch) x
  // batches per epoch + batch. Every set and map below is keyed by seq.
  int64_t Seq(int64_t epoch, int64_t batch) const { return (epoch - first_epoch_) * per_epoch_ + batch; }
  int64_t EpochOf(int64_t seq) const { return first_epoch_ + seq / per_epoch_; }
  int64_t BatchOf(int64_t seq) const { return seq % per_epoch_; }
  std::string Describe(int64_t seq) const;
  // The seq of (epoch, batch) if that epoch is armed and the batch in range;
  // -1 otherwise.
  int64_t ArmedSeq(int64_t epoch, int64_t batch) const;
  const EpochPlan& PlanOf(int64_t epoch) const { return plans_[static_cast<size_t>(epoch - plans_.front().epoch())]; }
  int64_t CurrentBegin() const { return Seq(epoch(), 0); }
  int64_t CurrentEnd() const { return Seq(epoch() + 1, 0); }
  bool CurrentDelivered() const { return static_cast<int64_t>(delivered_.size()) >= per_epoch_; }
  // A batch of the current epoch is requested or ready.
  bool CurrentUnderWay() const;
  // Batches requested from a server, over its live streams.
  int64_t Outstanding(const Server& server) const;
  // The window and lanes of `address` (producer_limits, else the servers'),
  // each at least 1.
  SchedulerOptions::Limits LimitsOf(const std::string& address) const;
  void Retire(Stream& stream, const absl::Status& status, bool from_server, absl::Time now, int64_t failed_seq = -1);
  void MaybeHalfClose(StreamId id);
  void Fail(absl::Status status);
  uint64_t NextJitter();
  // Fan-out: chooses the subset among the eligible members (not backing off,
  // not full); a batch refused by r servers widens it to r + 1. Streams of
  // servers left out finish what they have and close.
  void Rechoose(absl::Time now);

  std::deque<EpochPlan> plans_;  // armed epochs, the current one first
  // The server that should make batch `seq` in the shard-aware order: its
  // window's owner while that one is up, else its lane's (`lanes` caching
  // each epoch's dealing); "" in the global order or with no server chosen.
  std::string PreferredServer(int64_t seq, std::map<int64_t, std::vector<std::string>>* lanes) const;
  struct Choice {
    Stream* stream = nullptr;  // null: no server with room takes it
    StreamId id = -1;
    bool room = false;                     // some server has room (maybe one that refused it)
    bool preferred = false;                // the stream is the preferred server's
    bool reader = false;                   // ... or one that already reads the batch's window
    bool no_new_reads = false;             // ... or either, or nobody reads the window yet
    const std::string* address = nullptr;  // the stream's server
  };
  Choice Choose(int64_t seq, const std::string& preferred, absl::Time now);
  // The preferred server is up and this rank's: a batch may be held for it.
  bool CanWaitFor(const std::string& preferred, absl::Time now) const;
  void Assign(int64_t seq, const Choice& c, bool shard_aware, absl::Time now, std::vector<Assignment>* out);
  // The shard-aware order: (epoch, window) -> the servers that were sent
  // batches of that window (and so read its shards), the first of them its
  // owner (preferred for the window's other batches); armed epochs only.
  struct WindowReaders {
    std::string owner;
    std::set<std::string> servers;
  };
  std::map<std::pair<int64_t, int64_t>, WindowReaders> windows_;
  const int64_t first_epoch_;
  const int64_t per_epoch_;
  const SchedulerOptions options_;
  ClientMetrics* const metrics_;
  BottleneckMeter* const meter_;

  std::map<StreamId, Stream> streams_;
  std::map<std::string, Server> servers_;
  std::set<int64_t> pending_;  // not yet requested, lowest first
  std::map<int64_t, StreamId> assigned_;
  std::map<int64_t, absl::Time> requested_at_;
  std::map<int64_t, Batch> ready_;  // received, not yet handed over
  // Handed over (or before a resume): the current epoch's only, since later
  // epochs' batches are handed over after AdvanceEpoch, which drops these.
  std::set<int64_t> delivered_;
  std::map<int64_t, Attempts> attempts_;
  std::vector<StreamId> half_close_;
  int64_t next_to_deliver_ = 0;
  StreamId next_stream_ = 0;
  SchedulerCounts counts_;
  int64_t assignments_ = 0;  // batches dispatched so far (orders ties between servers)
  absl::Time no_server_since_ = absl::InfiniteFuture();
  absl::Status error_;
  uint64_t jitter_state_;
  std::optional<Fanout> fanout_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_BATCH_SCHEDULER_H_
