// A pool simulated on the real scheduler core: thousands of ranks (each a
// real BatchScheduler with bounded fan-out) against hundreds of servers whose
// capacities differ 4x, with servers failing and joining, and jobs of
// different demand. Simulated time, event-driven; a server makes one batch
// at a time, first come first served, at its capacity.
//
// Two phases: demand at 70 % of the pool's capacity (every rank's demand must
// be met, within a batch), then at 150 % (the pool must deliver at least 95 %
// of its capacity, each server within +-10 % of its capacity-weighted share).
// Throughout: streams per server at most 2x the mean, each rank's batches in
// flight or buffered within its prefetch cap, every batch handed over once
// and in order.
//
// make test runs 256 ranks x 32 servers; the benchmark
// (tests/bench/fanout_simulation.sh) sets STOKER_FANOUT_SIM=4096,512,120.
#include <cmath>
#include <cstdlib>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/batch_scheduler.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

constexpr int64_t kSampleBytes = 4;
constexpr int64_t kBatchBytes = 4 * kSampleBytes;     // batch size 4
constexpr int64_t kPrefetchBytes = 64 * kBatchBytes;  // the cap: 64 batches
constexpr double kNet = 0.001;                        // one-way network time, seconds

struct Size {
  int ranks = 256, servers = 32;
  double seconds = 120;  // both phases together; each measured over its last 60 %
};

Size SizeFromEnv() {
  Size s;
  if (const char* env = std::getenv("STOKER_FANOUT_SIM")) {
    std::vector<std::string> parts = absl::StrSplit(env, ',');
    if (parts.size() == 3) {
      s.ranks = std::atoi(parts[0].c_str());
      s.servers = std::atoi(parts[1].c_str());
      s.seconds = std::atof(parts[2].c_str());
    }
  }
  return s;
}

struct SimServer {
  std::string address;
  double capacity = 0;  // batches per second
  bool up = true, member = true;
  double busy_until = 0;
  double down_until = 0;
  std::set<std::pair<int, StreamId>> streams;  // (rank, stream) open to it
  double delivered_window = 0;                 // batches finished in the measuring window
  bool whole_window = true;                    // up through the measuring window
};

struct SimStream {
  int server = -1;
  int outstanding = 0;
  bool half_closed = false, ended = false;
};

struct Rank {
  std::unique_ptr<BatchScheduler> scheduler;
  EpochPlan plan;
  std::map<StreamId, SimStream> streams;
  double demand = 0;  // batches per second
  bool waiting = false;
  double wait_start = 0;
  int64_t next_expected = 0;  // ordered: the batch the next Take must give
  int64_t held = 0;           // requested or buffered now
  int64_t max_held = 0;
  int max_prefetch = 0;
  double taken_window = 0;  // batches taken in the measuring window
  explicit Rank(EpochPlan p) : plan(std::move(p)) {}
};

enum class Kind { kDone, kTake, kTick, kFail, kRejoin, kJoin };

struct Event {
  double t;
  Kind kind;
  int rank = -1, server = -1;
  StreamId stream = -1;
  int64_t epoch = 0, batch = 0;
  double queue = 0, made = 0, requested = 0;
  bool operator>(const Event& o) const { return t > o.t; }
};

absl::Time At(double t) { return absl::UnixEpoch() + absl::Seconds(3600 + t); }

class PoolSimulation {
 public:
  PoolSimulation(Size size, uint64_t seed) : size_(size), rng_(seed) {
    std::uniform_real_distribution<double> cap(5, 20);  // batches/s: 4x apart
    const int late = std::max(1, size.servers / 32);    // servers that join during the run
    for (int i = 0; i < size.servers; ++i) {
      SimServer s;
      s.address = absl::StrCat("10.0.", i / 250, ".", i % 250, ":50051");
      s.capacity = cap(rng_);
      s.member = s.up = i < size.servers - late;
      if (!s.up) Push({phase_end() * 0.3, Kind::kJoin, -1, i});
      servers_.push_back(s);
    }
    // Three jobs whose ranks want 1x, 2x and 4x as much; each rank's epoch
    // outlasts the run at its highest demand.
    double capacity = 0;
    for (const SimServer& s : servers_) capacity += s.capacity;
    const double weights = (1 + 2 + 4) * size.ranks / 3.0;
    const int64_t batches = static_cast<int64_t>(1.5 * capacity * 4 / weights * size.seconds) + 200;
    for (int r = 0; r < size.ranks; ++r) {
      EpochPlan plan(seed, 0, batches * 4, 4, false, 0, 1);
      ranks_.emplace_back(std::move(plan));
      Rank& rank = ranks_.back();
      weight_.push_back(1 << (r % 3));
      SchedulerOptions o;
      o.window = 2;
      o.streams_per_server = 2;
      o.sample_bytes = kSampleBytes;
      o.sample_shape = {4};
      o.batch_timeout = absl::Seconds(60);
      o.unavailable_timeout = absl::Hours(1);
      o.jitter_seed = seed * 100003 + static_cast<uint64_t>(r) + 1;
      FanoutOptions f;
      f.key = absl::StrCat("job", r % 3, "/", r);
      f.prefetch_bytes = kPrefetchBytes;
      f.batch_bytes = kBatchBytes;
      f.window = o.window;
      o.fanout = f;
      rank.scheduler = std::make_unique<BatchScheduler>(rank.plan, o, nullptr);
      // As each server's OpenSession answer tells the client.
      std::map<std::string, double> capacities;
      const char* exp = std::getenv("STOKER_FANOUT_CAPACITY_EXP");  // experiments: 0 = unweighted
      for (const SimServer& srv : servers_)
        capacities[srv.address] = std::pow(srv.capacity, exp ? std::atof(exp) : 1.0);
      rank.scheduler->fanout()->SetCapacities(capacities);
    }
    SetDemand(0.7);
    for (int r = 0; r < size.ranks; ++r) {
      Push({0.01 * (r % 50), Kind::kTake, r});
      Push({0.5 * r / size.ranks, Kind::kTick, r});
    }
    // Servers fail and come back: about 3 % of the pool in each phase.
    std::uniform_real_distribution<double> when(0, size.seconds);
    for (int i = 0; i < std::max(2, size.servers * 6 / 100); ++i) {
      Push({when(rng_), Kind::kFail, -1, static_cast<int>(rng_() % static_cast<uint64_t>(size.servers))});
    }
  }

  double phase_end() const { return size_.seconds / 2; }

  // Every rank's demand, so that the pool's capacity is `load` x the total.
  void SetDemand(double load) {
    double capacity = 0, weights = 0;
    for (const SimServer& s : servers_) capacity += s.capacity;
    for (int w : weight_) weights += w;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].demand = load * capacity * weight_[r] / weights;
      ranks_[r].scheduler->fanout()->SetDemand(ranks_[r].demand);
    }
  }

  struct PhaseResult {
    double delivered = 0, capacity = 0;  // batches/s in the measuring window
    double min_demand_met = 1e9;         // lowest rank's taken / demand
    double mean_demand_met = 0;
    double worst_share = 0;  // largest |load / capacity-weighted share - 1| over servers up throughout
    double streams_max = 0, streams_mean = 0;
    double servers_per_rank = 0, servers_per_rank_max = 0;
    int64_t prefetch_max = 0, held_max = 0;
  };

  PhaseResult RunPhase(double load, double from, double to) {
    SetDemand(load);
    const double measure_from = from + 0.4 * (to - from);
    bool measuring = false;
    while (!events_.empty() && events_.top().t < to) {
      Event e = events_.top();
      events_.pop();
      now_ = e.t;
      if (!measuring && now_ >= measure_from) {
        measuring = true;
        for (SimServer& s : servers_) {
          s.delivered_window = 0;
          s.whole_window = s.up;
        }
        for (Rank& r : ranks_) r.taken_window = 0;
      }
      Handle(e, measuring);
      if (::testing::Test::HasFatalFailure()) return {};
    }
    now_ = to;
    PhaseResult p;
    const double span = to - measure_from;
    double total = 0, capacity = 0, up_capacity = 0;
    for (const SimServer& s : servers_) {
      total += s.delivered_window;
      if (s.whole_window) up_capacity += s.capacity;
    }
    for (const SimServer& s : servers_) capacity += s.whole_window ? s.capacity : 0;
    p.delivered = total / span;
    p.capacity = capacity;
    double met = 0;
    for (const Rank& r : ranks_) {
      // Within one batch: a rank whose next batch is due just after the
      // window is not short (a 0.5 batch/s rank takes 6 in 12 s).
      const double m = std::min(1.0, (r.taken_window + 1) / (span * r.demand));
      p.min_demand_met = std::min(p.min_demand_met, m);
      met += m;
      p.prefetch_max = std::max<int64_t>(p.prefetch_max, r.max_prefetch);
      p.held_max = std::max(p.held_max, r.max_held);
      const int used = static_cast<int>(r.scheduler->ServersInUse().size());
      p.servers_per_rank += used;
      p.servers_per_rank_max = std::max<double>(p.servers_per_rank_max, used);
    }
    p.mean_demand_met = met / static_cast<double>(ranks_.size());
    if (std::getenv("STOKER_FANOUT_DEBUG")) {
      for (size_t i = 0; i < ranks_.size(); ++i) {
        const Rank& r = ranks_[i];
        const double m = (r.taken_window + 1) / (span * r.demand);
        if (m > 0.95) continue;
        const Fanout* f = r.scheduler->fanout();
        std::printf(
            "rank %zu weight %d met %.2f demand %.2f supply %.2f starved %.2f dropped %d target %d prefetch %d held "
            "%lld chosen:",
            i, weight_[i], m, r.demand, f->supply(), f->starved_ratio(), f->probes_dropped(), f->target(),
            f->prefetch(), (long long)r.held);
        for (const auto& c : f->chosen()) {
          std::printf(" %d(cap %.1f sat %d streams %zu)", ServerIndex(c), servers_[ServerIndex(c)].capacity,
                      f->saturated(c), servers_[ServerIndex(c)].streams.size());
        }
        std::printf("\n");
      }
    }
    p.servers_per_rank /= static_cast<double>(ranks_.size());
    double in_window = 0;
    for (const SimServer& s : servers_) in_window += s.whole_window ? s.delivered_window : 0;
    int up = 0;
    for (const SimServer& s : servers_) {
      if (!s.up) continue;
      ++up;
      p.streams_mean += static_cast<double>(s.streams.size());
      p.streams_max = std::max(p.streams_max, static_cast<double>(s.streams.size()));
      if (!s.whole_window) continue;
      const double share = in_window * s.capacity / up_capacity;
      p.worst_share = std::max(p.worst_share, std::abs(s.delivered_window / share - 1));
    }
    p.streams_mean /= std::max(1, up);
    return p;
  }

  // Every handed-over batch was the next one of its rank's epoch (ordered,
  // each once): checked at each Take; here, that the ranks got far.
  int64_t min_taken() const {
    int64_t m = INT64_MAX;
    for (const Rank& r : ranks_) m = std::min(m, r.next_expected);
    return m;
  }

 private:
  void Push(Event e) { events_.push(e); }

  void Handle(const Event& e, bool measuring) {
    switch (e.kind) {
      case Kind::kDone: return Done(e, measuring);
      case Kind::kTake: return TryTake(e.rank, measuring);
      case Kind::kTick: {
        Rank& r = ranks_[static_cast<size_t>(e.rank)];
        Membership(e.rank);
        for (StreamId id : r.scheduler->Tick(At(now_))) End(e.rank, id, absl::DeadlineExceededError("timeout"));
        Dispatch(e.rank);
        Push({now_ + 0.5, Kind::kTick, e.rank});
        return;
      }
      case Kind::kFail: {
        SimServer& s = servers_[static_cast<size_t>(e.server)];
        if (!s.up) return;
        s.up = s.member = false;
        s.whole_window = false;
        const auto streams = s.streams;
        for (const auto& [rank, id] : streams) End(rank, id, absl::UnavailableError("connection reset"));
        Push({now_ + 5, Kind::kRejoin, -1, e.server});
        return;
      }
      case Kind::kRejoin:
      case Kind::kJoin: {
        SimServer& s = servers_[static_cast<size_t>(e.server)];
        s.up = s.member = true;
        s.busy_until = now_;
        return;
      }
    }
  }

  std::vector<std::string> Members() const {
    std::vector<std::string> m;
    for (const SimServer& s : servers_) {
      if (s.member) m.push_back(s.address);
    }
    return m;
  }

  int ServerIndex(const std::string& address) const {
    // Addresses are 10.0.A.B:50051 with index A * 250 + B.
    const std::vector<std::string> parts = absl::StrSplit(address.substr(0, address.find(':')), '.');
    return std::atoi(parts[2].c_str()) * 250 + std::atoi(parts[3].c_str());
  }

  void Membership(int rank) {
    Rank& r = ranks_[static_cast<size_t>(rank)];
    for (const std::string& a : r.scheduler->OnMembership(Members(), At(now_))) {
      const int i = ServerIndex(a);
      const StreamId id = r.scheduler->OnStreamOpened(a, At(now_));
      r.streams[id].server = i;
      servers_[static_cast<size_t>(i)].streams.insert({rank, id});
    }
  }

  void End(int rank, StreamId id, const absl::Status& status) {
    Rank& r = ranks_[static_cast<size_t>(rank)];
    SimStream& s = r.streams.at(id);
    if (s.ended) return;
    s.ended = true;
    r.held -= s.outstanding;
    s.outstanding = 0;
    servers_[static_cast<size_t>(s.server)].streams.erase({rank, id});
    r.scheduler->OnStreamEnded(id, StreamEnd::Ended(status, /*from_server=*/false), At(now_));
  }

  void Dispatch(int rank) {
    Rank& r = ranks_[static_cast<size_t>(rank)];
    for (const Assignment& a : r.scheduler->Dispatch(At(now_))) {
      SimStream& st = r.streams.at(a.stream);
      ASSERT_FALSE(st.ended || st.half_closed) << "work for a closed stream";
      SimServer& srv = servers_[static_cast<size_t>(st.server)];
      const double arrive = now_ + kNet;
      const double start = std::max(arrive, srv.busy_until);
      const double finish = start + 1.0 / srv.capacity;
      srv.busy_until = finish;
      ++st.outstanding;
      ++r.held;
      Push({finish + kNet, Kind::kDone, rank, st.server, a.stream, a.epoch, a.batch, start - arrive, finish - arrive,
            now_});
    }
    r.max_held = std::max(r.max_held, r.held);
    r.max_prefetch = std::max(r.max_prefetch, r.scheduler->prefetch());
    for (StreamId id : r.scheduler->TakeHalfCloses()) {
      SimStream& st = r.streams.at(id);
      st.half_closed = true;
      if (st.outstanding == 0) End(rank, id, absl::OkStatus());
    }
  }

  void Done(const Event& e, bool measuring) {
    Rank& r = ranks_[static_cast<size_t>(e.rank)];
    SimStream& st = r.streams.at(e.stream);
    if (st.ended) return;  // the server failed first: the batch is lost with its stream
    SimServer& srv = servers_[static_cast<size_t>(e.server)];
    if (measuring) srv.delivered_window += 1;
    --st.outstanding;
    v1::BatchHeader h;
    h.set_epoch(e.epoch);
    h.set_batch_index(e.batch);
    const std::vector<int64_t> indices = r.plan.BatchIndices(e.batch);
    for (int64_t i : indices) {
      h.add_sample_indices(i);
      h.add_labels(0);
    }
    h.add_shape(static_cast<int64_t>(indices.size()));
    h.add_shape(4);
    h.set_total_bytes(static_cast<int64_t>(indices.size()) * kSampleBytes);
    ASSERT_TRUE(r.scheduler->CheckHeader(e.stream, h).ok());
    Batch b;
    b.epoch = e.epoch;
    b.batch_index = e.batch;
    b.sample_indices = indices;
    b.data = HostBuffer(indices.size() * kSampleBytes);
    b.stage_times.set_queue_seconds(e.queue);
    b.stage_times.set_server_seconds(e.made);
    ASSERT_TRUE(r.scheduler->OnBatchReceived(e.stream, std::move(b), At(now_)).ok());
    if (st.half_closed && st.outstanding == 0) End(e.rank, e.stream, absl::OkStatus());
    if (r.waiting) TryTake(e.rank, measuring);
    Dispatch(e.rank);
  }

  void TryTake(int rank, bool measuring) {
    Rank& r = ranks_[static_cast<size_t>(rank)];
    if (!r.scheduler->CanTake()) {
      if (!r.waiting) r.wait_start = now_;
      r.waiting = true;
      return;
    }
    if (r.waiting) r.scheduler->fanout()->OnWait(absl::Seconds(now_ - r.wait_start));
    r.waiting = false;
    Batch b;
    bool end = false;
    const absl::Status s = r.scheduler->Take(&b, &end);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_FALSE(end) << "an epoch sized to outlast the run ended";
    ASSERT_EQ(b.batch_index, r.next_expected) << "rank " << rank << ": out of order or twice";
    ++r.next_expected;
    --r.held;
    if (measuring) r.taken_window += 1;
    Push({now_ + 1.0 / r.demand, Kind::kTake, rank});
    Dispatch(rank);
  }

  Size size_;
  std::mt19937_64 rng_;
  std::vector<SimServer> servers_;
  std::vector<Rank> ranks_;
  std::vector<int> weight_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  double now_ = 0;
};

void Print(const char* phase, const PoolSimulation::PhaseResult& p) {
  std::printf(
      "%s: delivered %.0f batches/s of the up servers' capacity %.0f (%.3fx); demand met (within a batch): lowest "
      "rank %.3f, mean %.3f; load vs capacity-weighted share: worst %+.1f %%; streams per server: max %.0f, mean %.1f "
      "(%.2fx); "
      "servers per rank: mean %.2f, max %.0f; prefetch depth max %lld batches, held max %lld (cap %lld)\n",
      phase, p.delivered, p.capacity, p.delivered / p.capacity, p.min_demand_met, p.mean_demand_met,
      100 * p.worst_share, p.streams_max, p.streams_mean, p.streams_max / std::max(1e-9, p.streams_mean),
      p.servers_per_rank, p.servers_per_rank_max, static_cast<long long>(p.prefetch_max),
      static_cast<long long>(p.held_max), static_cast<long long>(kPrefetchBytes / kBatchBytes));
  std::fflush(stdout);
}

TEST(FanoutSimulationTest, PoolDeliversItsCapacityEvenlyWithBoundedStreamsAndMemory) {
  FLAGS_minloglevel = 3;  // expected failover warnings
  const Size size = SizeFromEnv();
  std::printf("simulating %d ranks x %d servers (capacities 5..20 batches/s), %.0f s\n", size.ranks, size.servers,
              size.seconds);
  const absl::Time started = absl::Now();
  PoolSimulation sim(size, 7);
  const auto under = sim.RunPhase(0.7, 0, sim.phase_end());
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  Print("demand 0.7x capacity", under);
  const auto over = sim.RunPhase(1.5, sim.phase_end(), size.seconds);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  Print("demand 1.5x capacity", over);
  std::printf("simulated in %.1f s\n", absl::ToDoubleSeconds(absl::Now() - started));
  // Under capacity: every rank gets what it asks for (within a batch).
  EXPECT_GE(under.min_demand_met, 0.95);
  // Over capacity: the pool delivers what it can, each server its share.
  EXPECT_GE(over.delivered / over.capacity, 0.95);
  EXPECT_LE(over.worst_share, 0.10);
  for (const auto& p : {under, over}) {
    EXPECT_LE(p.streams_max, 2 * p.streams_mean);
    EXPECT_LE(p.prefetch_max, kPrefetchBytes / kBatchBytes);
    EXPECT_LE(p.held_max, kPrefetchBytes / kBatchBytes + 1);  // + the batch the ordered caller waits for
    EXPECT_LT(p.servers_per_rank, size.servers / 2.0) << "fan-out not bounded";
  }
  EXPECT_GT(sim.min_taken(), 10) << "a rank starved throughout";
}

}  // namespace
}  // namespace stoker
