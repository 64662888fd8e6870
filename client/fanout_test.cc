#include "client/fanout.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

std::vector<std::string> Pool(int n, int from = 0) {
  std::vector<std::string> p;
  for (int i = from; i < from + n; ++i) p.push_back(absl::StrCat("10.0.0.", i, ":50051"));
  return p;
}

absl::Time At(double seconds) { return absl::UnixEpoch() + absl::Seconds(seconds); }

TEST(RendezvousOrderTest, RanksSpreadEvenlyAndAJoinMovesOnlyTheRanksThatPreferTheNewServer) {
  const std::vector<std::string> pool = Pool(64);
  std::map<std::string, int> first_two;
  std::vector<std::vector<std::string>> before;
  for (int r = 0; r < 4096; ++r) {
    std::vector<std::string> order = RendezvousOrder(absl::StrCat("job/", r), pool);
    ASSERT_EQ(order.size(), pool.size());
    ++first_two[order[0]];
    ++first_two[order[1]];
    before.push_back({order[0], order[1]});
  }
  // 8,192 picks over 64 servers: 128 each on average.
  for (const auto& [server, n] : first_two) {
    EXPECT_GT(n, 128 * 0.6) << server;
    EXPECT_LT(n, 128 * 1.4) << server;
  }
  std::vector<std::string> grown = pool;
  grown.push_back("10.0.1.0:50051");
  int moved = 0;
  for (int r = 0; r < 4096; ++r) {
    std::vector<std::string> order = RendezvousOrder(absl::StrCat("job/", r), grown);
    const std::set<std::string> now{order[0], order[1]}, then(before[r].begin(), before[r].end());
    if (now != then) {
      ++moved;
      EXPECT_TRUE(now.count("10.0.1.0:50051")) << "rank " << r << " moved without the new server";
    }
  }
  // About 2/65 of the ranks take the new server among their two.
  EXPECT_GT(moved, 4096 * 2 / 65 / 2);
  EXPECT_LT(moved, 4096 * 2 / 65 * 2);
  // Fixed across processes: the same key gives the same order (the hash is
  // not seeded per process).
  EXPECT_EQ(RendezvousOrder("job/7", pool), RendezvousOrder("job/7", pool));
}

FanoutOptions Options() {
  FanoutOptions o;
  o.key = "job/0";
  o.min_servers = 2;
  o.initial_servers = 4;
  o.max_servers = 16;
  o.window = 2;
  o.interval = absl::Seconds(1);
  o.batch_bytes = 1000;
  o.prefetch_bytes = 64 * 1000;
  return o;
}

// Feeds `batches` batches from each chosen server: latency, queue and make times.
void Feed(Fanout& f, double latency, double queue, double make, int batches = 3) {
  for (const std::string& s : f.chosen()) {
    for (int i = 0; i < batches; ++i) f.OnBatch(s, absl::Seconds(latency), queue, queue + make);
  }
}

TEST(FanoutTest, StartsAtTheInitialSizeAndGrowsWhileShortOfUnsaturatedServers) {
  Fanout f(Options());
  const std::vector<std::string> pool = Pool(32);
  EXPECT_EQ(f.Choose(pool, 1, At(0)).size(), 4u);
  EXPECT_EQ(f.prefetch(), 2 * 2 * 4);  // before a demand is known: 2 x window x servers
  // Each server supplies window / latency = 2 / 0.5 = 4 batches/s; the rank
  // wants 40: short, and the servers are not saturated (no queue).
  f.SetDemand(40);
  double t = 0;
  double reached = -1;
  for (int step = 0; step < 20; ++step) {
    Feed(f, 0.5, 0.0, 0.4);
    f.Evaluate(At(t));
    f.Choose(pool, 1, At(t));
    if (reached < 0 && f.target() > 4) reached = t;
    t += 1.1;
  }
  // 1.25 x 40 / 4 = 12.5: 13 servers, taken in one step (not one a probe),
  // right after the first interval (the start) is past.
  EXPECT_EQ(f.target(), 13);
  EXPECT_EQ(f.chosen().size(), 13u);
  EXPECT_GE(reached, 0);
  EXPECT_LE(reached, 3.5);
  EXPECT_EQ(f.probes_dropped(), 0);
}

TEST(FanoutTest, GrowsAtMostToTheCapAndTheEligibleServers) {
  for (const int eligible : {32, 7}) {
    Fanout f(Options());
    const std::vector<std::string> pool = Pool(eligible);
    f.Choose(pool, 1, At(0));
    f.SetDemand(400);  // 125 servers at 4 batches/s each
    double t = 0;
    for (int step = 0; step < 10; ++step) {
      Feed(f, 0.5, 0.0, 0.4);
      f.Evaluate(At(t));
      f.Choose(pool, 1, At(t));
      t += 1.1;
    }
    EXPECT_EQ(f.target(), std::min(eligible, 16)) << eligible << " eligible";  // max_servers 16
  }
}

TEST(FanoutTest, ASaturatedPoolKeepsTheRankAtItsSize) {
  Fanout f(Options());
  const std::vector<std::string> pool = Pool(32);
  f.Choose(pool, 1, At(0));
  f.SetDemand(40);
  double t = 0;
  int most = 0;
  for (int step = 0; step < 60; ++step) {
    // Every server queues batches for 10x their making: the pool is full.
    Feed(f, 2.0, 1.0, 0.1);
    f.Evaluate(At(t));
    f.Choose(pool, 1, At(t));
    most = std::max(most, f.target());
    t += 1.1;
  }
  EXPECT_LE(most, 5) << "a probe at a time, never more";
  EXPECT_EQ(f.target(), 4);
  EXPECT_GE(f.probes_dropped(), 2);
  EXPECT_LE(f.probes_dropped(), 10) << "probes back off";
}

TEST(FanoutTest, ShrinksWhenOversuppliedButNotBelowTheFloor) {
  Fanout f(Options());
  const std::vector<std::string> pool = Pool(32);
  f.Choose(pool, 1, At(0));
  f.SetDemand(1);  // one batch a second; each server supplies 20
  double t = 0;
  for (int step = 0; step < 20; ++step) {
    Feed(f, 0.1, 0.0, 0.05);
    f.Evaluate(At(t));
    f.Choose(pool, 1, At(t));
    t += 1.1;
  }
  EXPECT_EQ(f.target(), 2);
  EXPECT_EQ(f.chosen().size(), 2u);
  // The rank still needs a failover's 2 s x 1 batch/s + window batches (more
  // than 1.25 x 1 x 0.1 in flight): the floor of 2 is below that.
  EXPECT_EQ(f.prefetch(), 4);
  // A batch refused by two servers needs a third.
  EXPECT_EQ(f.Choose(pool, 3, At(t)).size(), 3u);
}

TEST(FanoutTest, PrefetchFollowsLatencyTimesRateUpToTheByteCap) {
  FanoutOptions o = Options();
  o.initial_servers = 2;
  o.failover = absl::ZeroDuration();  // the latency term alone (the failover term: the next test)
  Fanout f(o);
  const std::vector<std::string> pool = Pool(2);
  f.Choose(pool, 1, At(0));
  f.SetDemand(10);
  Feed(f, 0.8, 0.0, 0.1);  // supply 2 x 2 / 0.8 = 5 batches/s < demand
  f.Evaluate(At(0));
  // min(demand, supply) = 5 batches/s x 0.8 s x 1.25 = 5, + window 2.
  EXPECT_EQ(f.prefetch(), 7);
  // Slower servers do not deepen it past what they can supply: latency x
  // supply is the window x servers (Little's law).
  Feed(f, 100, 0.0, 0.1, 50);
  f.SetDemand(1000);
  f.Evaluate(At(10));
  EXPECT_LE(f.prefetch(), 2 + static_cast<int>(1.25 * 2 * 2) + 1);
  // The byte cap: 4 batches of 1000 bytes.
  FanoutOptions capped = o;
  capped.prefetch_bytes = 4000;
  Fanout c(capped);
  c.Choose(pool, 1, At(0));
  c.SetDemand(10);
  Feed(c, 0.8, 0.0, 0.1);
  c.Evaluate(At(0));
  EXPECT_EQ(c.prefetch(), 4);
  FanoutOptions fixed = o;
  fixed.fixed_prefetch = 9;
  Fanout g(fixed);
  g.Choose(pool, 1, At(0));
  g.SetDemand(10);
  Feed(g, 0.8, 0.0, 0.1);
  g.Evaluate(At(0));
  EXPECT_EQ(g.prefetch(), 9);  // an explicit depth wins
}

TEST(FanoutTest, PrefetchCoversAFailoverOfWhatTheServersCanSupply) {
  FanoutOptions o = Options();
  o.initial_servers = 2;
  o.failover = absl::Seconds(2);
  Fanout f(o);
  const std::vector<std::string> pool = Pool(2);
  f.Choose(pool, 1, At(0));
  f.SetDemand(3);
  Feed(f, 0.1, 0.0, 0.05);  // supply 2 x 2 / 0.1 = 40 batches/s; latency term 1.25 x 0.1 x 3 < 1
  f.Evaluate(At(0));
  EXPECT_EQ(f.prefetch(), 6 + 2);  // 2 s x 3 batches/s + window
  // Servers that cannot supply the demand: 2 s of what they supply.
  f.SetDemand(1000);
  Feed(f, 2.0, 0.0, 0.1, 50);  // supply 2 x 2 / 2 = 2 batches/s
  f.Evaluate(At(10));
  EXPECT_LE(f.prefetch(), static_cast<int>(std::ceil(1.25 * 2.0 * 2)) + 2 + 1);
  EXPECT_GE(f.prefetch(), 2 * 2 + 2);
  // A fast step: the failover term stops at 2 x window x servers (8 here).
  Fanout fast(o);
  fast.Choose(pool, 1, At(0));
  fast.SetDemand(30);
  Feed(fast, 0.1, 0.0, 0.05);  // supply 40 batches/s; latency term ceil(1.25 x 0.1 x 30) = 4
  fast.Evaluate(At(0));
  EXPECT_EQ(fast.prefetch(), 8 + 2);
  FanoutOptions none = o;
  none.failover = absl::ZeroDuration();
  Fanout g(none);
  g.Choose(pool, 1, At(0));
  g.SetDemand(3);
  Feed(g, 0.1, 0.0, 0.05);
  g.Evaluate(At(0));
  EXPECT_EQ(g.prefetch(), 1 + 2);  // without it: ceil(1.25 x 0.1 x 3) + window
}

TEST(FanoutTest, AServerThatLeavesIsReplacedByTheNextInOrderAndTheRestStay) {
  Fanout f(Options());
  std::vector<std::string> pool = Pool(32);
  const std::vector<std::string> before = f.Choose(pool, 1, At(0));
  pool.erase(std::find(pool.begin(), pool.end(), before[1]));
  const std::vector<std::string> after = f.Choose(pool, 1, At(1));
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[1], before[2]);
  EXPECT_EQ(after[2], before[3]);
  EXPECT_EQ(std::count(after.begin(), after.end(), before[1]), 0);
}

}  // namespace
}  // namespace stoker
