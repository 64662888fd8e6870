// Deterministic simulation of the client's scheduling: thousands of seeded
// random schedules of server kills, stalls, slow and out-of-order answers,
// duplicate and late answers, joins, leaves and drains, against the real
// BatchScheduler with simulated time, half of them with bounded fan-out. Each run must deliver every batch
// exactly once (in order when ordered) or end with a clear error: a batch that
// fails on every server ends the epoch with that batch's error.
#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/batch_scheduler.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

constexpr int64_t kSampleBytes = 4;

struct SimServer {
  std::string address;
  bool up = true;
  bool member = true;
  absl::Time down_until = absl::UnixEpoch(), stalled_until = absl::UnixEpoch(), rejoin_at = absl::UnixEpoch();
};

struct SimStream {
  int server = 0;
  std::vector<std::pair<int64_t, int64_t>> requested;  // (epoch, batch), in the order requested
  bool half_closed = false;
  bool cancelling = false;  // given up by the client; the cancel has not landed yet
  bool ended = false;
};

struct Outcome {
  bool finished = false;  // every epoch handed over
  absl::Status error;
  std::vector<std::vector<int64_t>> delivered;  // per epoch, in hand-over order
  int64_t num_batches = 0;                      // per epoch
  int64_t reassigned = 0;
  int64_t affinity_hits = 0, affinity_misses = 0;
  int steps = 0;
};

class Simulation {
 public:
  explicit Simulation(uint64_t seed) : rng_(seed) {
    // Half the schedules use bounded fan-out over up to 7 servers (a subset
    // of 1..3 at first), so that kills, leaves and drains meet re-choices.
    fanout_ = Uniform(2) == 0;
    const int servers = 1 + Uniform(fanout_ ? 7 : 4);
    for (int i = 0; i < servers; ++i) servers_.push_back({absl::StrCat("s", i, ":1")});
    const int64_t samples = 5 + Uniform(120), batch = 1 + Uniform(8);
    const bool drop_last = Uniform(2) == 0;
    epochs_ = 1 + Uniform(3);
    // A third of the schedules use the shard-aware order (issue 50), whose
    // layout comes from a stream of its own so that the other schedules
    // stay as they were.
    shard_aware_ = seed % 3 == 1;
    ShardLayout layout;
    if (shard_aware_) {
      std::mt19937_64 shard_rng(seed ^ 0x5A4D5348ull);
      for (int64_t left = samples; left > 0;) {
        const int64_t n = std::min<int64_t>(left, 1 + static_cast<int64_t>(shard_rng() % 20));
        layout.sizes.push_back(n);
        left -= n;
      }
      layout.window = 1 + static_cast<int>(shard_rng() % 3);
      layout.lanes = 1 + static_cast<int>(shard_rng() % 4);
    }
    for (int e = 0; e < epochs_; ++e) {
      plans_.emplace_back(seed, e, samples, batch, drop_last, 0, 1, true, shard_aware_ ? &layout : nullptr);
    }
    // As the client does: the next epoch armed when one starts, so that its
    // batches are requested while the current one drains; or (the other
    // half) only at the boundary.
    arm_early_ = Uniform(2) == 0;
    SchedulerOptions o;
    o.window = 1 + Uniform(3);
    o.streams_per_server = 1 + Uniform(3);  // lanes: each its own stream to the same server
    o.prefetch = 1 + Uniform(8);
    o.ordered = Uniform(4) != 0;
    o.batch_timeout = absl::Seconds(2);
    o.unavailable_timeout = absl::Hours(1);  // its own test; here every run must end by delivering or by the poison
    o.sample_bytes = kSampleBytes;
    o.sample_shape = {4};
    o.jitter_seed = seed + 1;
    // The run's end known (streams half-close after it) or not (they stay open).
    o.final_epoch = Uniform(2) == 0 ? epochs_ - 1 : -1;
    const int64_t per_epoch = plans_[0].num_batches();
    poison_ = (seed % 5 == 0 && per_epoch > 0) ? Uniform(static_cast<int>(per_epoch)) : -1;
    poison_epoch_ = Uniform(epochs_);
    o.max_attempts = 1000;  // kills are random here; the attempt cap has its own test
    if (fanout_) {
      FanoutOptions f;
      f.key = absl::StrCat("sim/", seed);
      f.min_servers = 1 + Uniform(2);
      f.initial_servers = 1 + Uniform(3);
      f.max_servers = 1 + Uniform(7);
      f.interval = absl::Milliseconds(200 + Uniform(800));
      f.window = o.window;
      o.fanout = f;
    }
    ordered_ = o.ordered;
    scheduler_ = std::make_unique<BatchScheduler>(plans_[0], o, nullptr);
    if (fanout_) scheduler_->fanout()->SetDemand(0.5 + Uniform(40));  // batches/s: the subset grows and shrinks
    if (arm_early_ && epochs_ > 1) {
      EXPECT_TRUE(scheduler_->ArmEpoch(plans_[1]).ok());
    }
  }

  int64_t poison() const { return poison_; }
  bool fanout() const { return fanout_; }
  bool shard_aware() const { return shard_aware_; }
  int poison_epoch() const { return poison_epoch_; }
  int epochs() const { return epochs_; }
  bool ordered() const { return ordered_; }

  Outcome Run(int max_steps) {
    Outcome out;
    out.num_batches = plans_[0].num_batches();
    out.delivered.resize(static_cast<size_t>(epochs_));
    for (out.steps = 0; out.steps < max_steps; ++out.steps) {
      Membership();
      Dispatch();
      const int e = Uniform(100);
      if (e < 49) {
        Answer();
      } else if (e < 50) {
        Kill();
      } else if (e < 51) {
        Stall();
      } else if (e < 52) {
        if (servers_.size() > 1) Drain();
      } else if (e < 53) {
        if (servers_.size() > 1) Leave();
      } else if (e < 56) {
        LateAnswer();
      } else if (e < 75) {
        Batch batch;
        bool end = false;
        if (!scheduler_->CanTake()) {
          const absl::Duration waited = absl::Milliseconds(Uniform(50));
          if (Fanout* f = scheduler_->fanout()) f->OnWait(waited);
          continue;
        }
        absl::Status st = scheduler_->Take(&batch, &end);
        if (!st.ok()) {
          out.error = st;
          break;
        }
        if (end) {
          if (current_ + 1 >= epochs_) {
            out.finished = true;
            break;
          }
          if (absl::Status s = NextEpoch(); !s.ok()) {
            if (s.code() == absl::StatusCode::kInternal) ADD_FAILURE() << s;
            out.error = s;
            break;
          }
          continue;
        }
        if (batch.epoch != current_) {
          ADD_FAILURE() << "batch " << batch.batch_index << " of epoch " << batch.epoch << " handed over in epoch "
                        << current_;
          break;
        }
        out.delivered[static_cast<size_t>(current_)].push_back(batch.batch_index);
      } else {
        Advance(absl::Milliseconds(1 + Uniform(400)));
      }
    }
    out.reassigned = scheduler_->counts().reassigned;
    out.affinity_hits = scheduler_->counts().affinity_hits;
    out.affinity_misses = scheduler_->counts().affinity_misses;
    return out;
  }

 private:
  int Uniform(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }

  // The caller starts the next epoch (StokerClient::StartEpoch).
  absl::Status NextEpoch() {
    if (scheduler_->last_armed_epoch() == current_) {
      if (absl::Status s = scheduler_->ArmEpoch(plans_[static_cast<size_t>(current_ + 1)]); !s.ok()) return s;
    }
    // A run that failed while the next epoch was under way: the caller hears
    // the error when it starts that epoch (the client starts afresh, and the
    // same batch fails again).
    if (!scheduler_->error().ok()) return scheduler_->error();
    if (!scheduler_->CanAdvance()) return absl::InternalError("cannot advance after the end of an epoch");
    if (absl::Status s = scheduler_->AdvanceEpoch(); !s.ok()) return s;
    ++current_;
    if (arm_early_ && current_ + 1 < epochs_) return scheduler_->ArmEpoch(plans_[static_cast<size_t>(current_ + 1)]);
    return absl::OkStatus();
  }

  void Membership() {
    std::vector<std::string> members;
    for (const SimServer& s : servers_) {
      if (s.member) members.push_back(s.address);
    }
    for (const std::string& a : scheduler_->OnMembership(members, now_)) {
      SimServer& s = ServerOf(a);
      if (!s.up) {
        scheduler_->OnConnectFailed(a, "cannot connect");
        continue;
      }
      const StreamId id = scheduler_->OnStreamOpened(a, now_);
      streams_[id].server = static_cast<int>(&s - servers_.data());
    }
  }

  void Dispatch() {
    for (const Assignment& a : scheduler_->Dispatch(now_)) {
      SimStream& s = streams_.at(a.stream);
      ASSERT_FALSE(s.ended || s.cancelling) << "work for a stream that is gone";
      ASSERT_FALSE(s.half_closed) << "work for a half-closed stream";
      s.requested.emplace_back(a.epoch, a.batch);
    }
    for (StreamId id : scheduler_->TakeHalfCloses()) streams_.at(id).half_closed = true;
  }

  SimServer& ServerOf(const std::string& address) {
    for (SimServer& s : servers_) {
      if (s.address == address) return s;
    }
    ADD_FAILURE() << "unknown server " << address;
    return servers_[0];
  }

  std::vector<StreamId> Open(bool answering) {
    std::vector<StreamId> ids;
    for (auto& [id, s] : streams_) {
      if (s.ended || s.cancelling) continue;
      const SimServer& srv = servers_[s.server];
      if (answering && (!srv.up || now_ < srv.stalled_until)) continue;
      ids.push_back(id);
    }
    return ids;
  }

  void End(StreamId id, const absl::Status& status, bool from_server, int64_t failed_batch = -1,
           int64_t failed_epoch = -1) {
    SimStream& s = streams_.at(id);
    if (s.ended) return;
    s.ended = true;
    scheduler_->OnStreamEnded(id, StreamEnd::Ended(status, from_server, failed_batch, failed_epoch), now_);
  }

  v1::BatchHeader HeaderFor(int64_t epoch, int64_t b) {
    v1::BatchHeader h;
    h.set_epoch(epoch);
    h.set_batch_index(b);
    const std::vector<int64_t> indices = plans_[static_cast<size_t>(epoch)].BatchIndices(b);
    for (int64_t i : indices) {
      h.add_sample_indices(i);
      h.add_labels(0);
    }
    h.add_shape(static_cast<int64_t>(indices.size()));
    h.add_shape(4);
    h.set_total_bytes(static_cast<int64_t>(indices.size()) * kSampleBytes);
    return h;
  }

  // A server answers one batch (usually the oldest, sometimes another).
  void Answer() {
    std::vector<StreamId> ids = Open(/*answering=*/true);
    if (ids.empty()) return;
    const StreamId id = ids[Uniform(static_cast<int>(ids.size()))];
    SimStream& s = streams_.at(id);
    if (s.requested.empty()) {
      if (s.half_closed) End(id, absl::OkStatus(), true);
      return;
    }
    if (Uniform(50) == 0) {  // a duplicate or unrequested answer: must be refused
      const int64_t e = Uniform(epochs_), b = Uniform(static_cast<int>(plans_[0].num_batches()));
      if (std::find(s.requested.begin(), s.requested.end(), std::make_pair(e, b)) == s.requested.end()) {
        const absl::Status refused = scheduler_->CheckHeader(id, HeaderFor(e, b));
        ASSERT_FALSE(refused.ok()) << "unrequested batch " << b << " of epoch " << e << " accepted";
        End(id, refused, /*from_server=*/false);
        return;
      }
    }
    const size_t pick = Uniform(4) == 0 ? Uniform(static_cast<int>(s.requested.size())) : 0;
    const auto [e, b] = s.requested[pick];
    if (b == poison_ && e == poison_epoch_) {
      // The server names the batch and its epoch (as its trailing metadata
      // does); sometimes only the batch (an older server), sometimes neither.
      const bool named = Uniform(4) != 0, with_epoch = Uniform(3) != 0;
      End(id, absl::DataLossError(absl::StrCat("sample of batch ", b, " of epoch ", e, ": corrupt")),
          /*from_server=*/true, named ? b : -1, named && with_epoch ? e : -1);
      return;
    }
    ASSERT_TRUE(scheduler_->CheckHeader(id, HeaderFor(e, b)).ok()) << "requested batch " << b << " refused";
    Batch batch;
    batch.epoch = e;
    batch.batch_index = b;
    batch.sample_indices = plans_[static_cast<size_t>(e)].BatchIndices(b);
    batch.data = HostBuffer(batch.sample_indices.size() * kSampleBytes);
    ASSERT_TRUE(scheduler_->OnBatchReceived(id, std::move(batch), now_).ok());
    s.requested.erase(s.requested.begin() + static_cast<long>(pick));
    for (StreamId h : scheduler_->TakeHalfCloses()) streams_.at(h).half_closed = true;
  }

  // An answer on a stream the client gave up, before the cancel landed.
  void LateAnswer() {
    for (auto& [id, s] : streams_) {
      if (!s.cancelling || s.ended || s.requested.empty()) continue;
      ASSERT_FALSE(scheduler_->CheckHeader(id, HeaderFor(s.requested[0].first, s.requested[0].second)).ok())
          << "late copy accepted";
      return;
    }
  }

  void Kill() {
    SimServer& srv = servers_[Uniform(static_cast<int>(servers_.size()))];
    srv.up = false;
    srv.down_until = now_ + absl::Milliseconds(100 + Uniform(5000));
    for (auto& [id, s] : streams_) {
      if (&servers_[s.server] == &srv && !s.ended) End(id, absl::UnavailableError("connection reset"), false);
    }
  }

  void Stall() {
    SimServer& srv = servers_[Uniform(static_cast<int>(servers_.size()))];
    srv.stalled_until = now_ + absl::Milliseconds(100 + Uniform(5000));
  }

  void Drain() {
    SimServer& srv = servers_[Uniform(static_cast<int>(servers_.size()))];
    for (auto& [id, s] : streams_) {
      if (&servers_[s.server] == &srv && !s.ended && !s.cancelling) scheduler_->OnDraining(id);
    }
    for (StreamId h : scheduler_->TakeHalfCloses()) streams_.at(h).half_closed = true;
    // It restarts later (a new process): out of the set meanwhile.
    srv.member = false;
    srv.rejoin_at = now_ + absl::Milliseconds(100 + Uniform(3000));
  }

  void Leave() {  // DNS: the address disappears for a while
    SimServer& srv = servers_[Uniform(static_cast<int>(servers_.size()))];
    srv.member = false;
    srv.rejoin_at = now_ + absl::Milliseconds(100 + Uniform(3000));
  }

  void Advance(absl::Duration d) {
    now_ += d;
    for (auto& [id, s] : streams_) {
      if (s.cancelling && !s.ended) {
        s.ended = true;  // already retired by the scheduler; its end is reported once more
        scheduler_->OnStreamEnded(id, StreamEnd::Ended(absl::CancelledError("cancelled"), false), now_);
      }
    }
    for (SimServer& srv : servers_) {
      if (!srv.up && now_ >= srv.down_until) srv.up = true;
      if (!srv.member && now_ >= srv.rejoin_at) srv.member = true;
    }
    for (StreamId id : scheduler_->Tick(now_)) streams_.at(id).cancelling = true;
  }

  std::mt19937_64 rng_;
  std::vector<SimServer> servers_;
  std::vector<EpochPlan> plans_;  // one per epoch of the run
  std::unique_ptr<BatchScheduler> scheduler_;
  std::map<StreamId, SimStream> streams_;
  absl::Time now_ = absl::UnixEpoch() + absl::Hours(1);
  int64_t poison_ = -1;
  int poison_epoch_ = 0;
  int epochs_ = 1;
  int64_t current_ = 0;  // the epoch being handed over
  bool arm_early_ = true;
  bool ordered_ = true;
  bool fanout_ = false;
  bool shard_aware_ = false;
};

TEST(SchedulerSimulationTest, ExactlyOnceOrAClearErrorInEverySchedule) {
  FLAGS_minloglevel = 3;  // tens of thousands of expected failover warnings
  constexpr int kSeeds = 10000;
  int finished = 0, poisoned = 0, reassigned_runs = 0, multi_epoch_runs = 0, fanout_runs = 0, shard_runs = 0;
  int64_t hits = 0, misses = 0, global_affinity = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    Simulation sim(seed);
    const Outcome out = sim.Run(/*max_steps=*/200000);
    if (::testing::Test::HasFatalFailure()) FAIL() << "seed " << seed;
    ASSERT_TRUE(out.finished || !out.error.ok()) << "seed " << seed << ": no end after " << out.steps << " steps";
    for (int e = 0; e < sim.epochs(); ++e) {
      const std::vector<int64_t>& delivered = out.delivered[static_cast<size_t>(e)];
      std::set<int64_t> seen;
      for (int64_t b : delivered) {
        ASSERT_TRUE(seen.insert(b).second) << "seed " << seed << ": batch " << b << " of epoch " << e << " twice";
      }
      if (sim.ordered()) {
        for (size_t i = 0; i < delivered.size(); ++i) {
          ASSERT_EQ(delivered[i], static_cast<int64_t>(i)) << "seed " << seed << ": out of order in epoch " << e;
        }
      }
      if (sim.poison() < 0) {
        ASSERT_EQ(static_cast<int64_t>(seen.size()), out.num_batches) << "seed " << seed << ", epoch " << e;
      }
    }
    if (sim.poison() >= 0) {
      ASSERT_FALSE(out.finished) << "seed " << seed << ": the poisoned batch was delivered";
      ASSERT_EQ(out.error.code(), absl::StatusCode::kDataLoss) << "seed " << seed << ": " << out.error;
      // The server's own message names the bad batch (when the server did not
      // name it in its trailers, the batches sent with it share the blame).
      ASSERT_NE(out.error.message().find(
                    absl::StrCat("sample of batch ", sim.poison(), " of epoch ", sim.poison_epoch(), ":")),
                std::string::npos)
          << "seed " << seed << ": " << out.error;
      ++poisoned;
    } else {
      ASSERT_TRUE(out.finished) << "seed " << seed << ": " << out.error;
      ++finished;
    }
    multi_epoch_runs += sim.epochs() > 1;
    fanout_runs += sim.fanout();
    shard_runs += sim.shard_aware();
    if (sim.shard_aware()) {
      hits += out.affinity_hits;
      misses += out.affinity_misses;
    } else {
      global_affinity += out.affinity_hits + out.affinity_misses;
    }
    reassigned_runs += out.reassigned > 0;
  }
  // The schedules really exercised failover.
  EXPECT_GT(reassigned_runs, kSeeds / 4);
  EXPECT_GT(multi_epoch_runs, kSeeds / 2);
  EXPECT_GT(fanout_runs, kSeeds / 3);
  // The shard-aware order's batches mostly went to their lane's server,
  // through kills, stalls and re-choices; the global order has no lanes.
  EXPECT_GT(shard_runs, kSeeds / 4);
  EXPECT_GT(hits, 2 * misses) << hits << " hits, " << misses << " misses";
  EXPECT_EQ(global_affinity, 0);
  RecordProperty("finished", finished);
  RecordProperty("poisoned", poisoned);
  RecordProperty("with_reassignment", reassigned_runs);
}

}  // namespace
}  // namespace stoker
