#include "client/batch_scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "client/batch_scheduler_test_util.h"
#include "gtest/gtest.h"

namespace stoker {
namespace batch_scheduler_test {  // the shared fixtures (batch_scheduler_test_util.h)
namespace {

// Review 1.2: under FAIL a bad batch ended each server's stream with
// DATA_LOSS, went back to pending, and was retried for ever.
TEST(BatchSchedulerTest, BatchRefusedByThreeServersEndsTheEpochWithItsError) {
  BatchScheduler s(Plan(), Options(), nullptr);
  const std::vector<std::string> servers{"a:1", "b:1", "c:1", "d:1"};
  absl::Time now = kT0;
  const absl::Status bad = absl::DataLossError("sample 3 (x.jpg): corrupt: not a JPEG");
  std::set<std::string> refused;
  for (int round = 0; round < 20 && s.error().ok(); ++round) {
    for (const std::string& a : s.OnMembership(servers, now)) s.OnStreamOpened(a, now);
    std::vector<Assignment> as = s.Dispatch(now);
    // Whichever stream got batch 0 fails with the batch's error.
    for (const Assignment& a : as) {
      if (a.batch != 0) continue;
      s.OnStreamEnded(a.stream, StreamEnd::Ended(bad, /*from_server=*/true, /*failed_batch=*/0), now);
    }
    now += absl::Seconds(5);  // past every backoff
  }
  ASSERT_FALSE(s.error().ok());
  EXPECT_EQ(s.error().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.error().message().find("batch 0 of epoch 0 failed on 3 servers"), std::string::npos)
      << s.error() << " " << s.counts().reassigned;
  EXPECT_NE(s.error().message().find("x.jpg"), std::string::npos);
  Batch batch;
  bool end = false;
  EXPECT_TRUE(s.CanTake());
  EXPECT_EQ(s.Take(&batch, &end).code(), absl::StatusCode::kDataLoss);
}

// Failover test 5.1 found it: when the consumer sets the pace, a fast server
// has no batch outstanding at each dispatch, and the least-loaded rule alone
// always picked it over a server that had just joined, which never got work.
TEST(BatchSchedulerTest, AServerThatJoinsWhileTheConsumerSetsThePaceGetsWork) {
  SchedulerOptions o = Options();
  o.prefetch = 1;  // one batch at a time: every dispatch sees both servers idle
  BatchScheduler s(EpochPlan(7, 0, 20, 2, false, 0, 1), o, nullptr);
  absl::Time now = kT0;
  for (const std::string& a : s.OnMembership({"a:1"}, now)) s.OnStreamOpened(a, now);
  std::map<std::string, int> served;
  for (int64_t b = 0; b < 10; ++b) {
    if (b == 3) {
      for (const std::string& a : s.OnMembership({"a:1", "b:1"}, now)) s.OnStreamOpened(a, now);
    }
    std::vector<Assignment> as = s.Dispatch(now);
    ASSERT_EQ(as.size(), 1u);
    ASSERT_TRUE(s.CheckHeader(as[0].stream, Header(s, as[0].batch)).ok());
    ASSERT_TRUE(s.OnBatchReceived(as[0].stream, BatchFor(s, as[0].batch), now).ok());
    Batch batch;
    bool end = false;
    ASSERT_TRUE(s.Take(&batch, &end).ok());
    ++served[b < 3 ? "before" : (batch.server.empty() ? std::to_string(as[0].stream) : batch.server)];
    now += absl::Milliseconds(300);
  }
  EXPECT_EQ(served["before"], 3);
  EXPECT_EQ(served.size(), 3u) << "after the join both servers are used";
}

// Several streams (lanes) per server: each lane is opened once, on its own
// lane number; together they hold at most the server's window, and batches
// take turns between them.
TEST(BatchSchedulerTest, AServersStreamsShareItsWindowAndTakeTurns) {
  SchedulerOptions o = Options();
  o.streams_per_server = 2;
  o.window = 2;
  BatchScheduler s(EpochPlan(7, 0, 20, 2, false, 0, 1), o, nullptr);  // 10 batches
  const std::vector<std::string> to_open = s.OnMembership({"a:1"}, kT0);
  ASSERT_EQ(to_open, (std::vector<std::string>{"a:1", "a:1"}));
  std::vector<int> lanes;
  for (const std::string& a : to_open) {
    const int lane = s.FreeLane(a);
    const StreamId id = s.OnStreamOpened(a, kT0);
    EXPECT_EQ(s.lane(id), lane);
    lanes.push_back(lane);
  }
  EXPECT_EQ(lanes, (std::vector<int>{0, 1}));
  EXPECT_TRUE(s.OnMembership({"a:1"}, kT0).empty()) << "both lanes are open";
  std::map<StreamId, int> per_stream;
  absl::Time now = kT0;
  for (int round = 0; round < 5; ++round) {
    std::vector<Assignment> as = s.Dispatch(now);
    ASSERT_EQ(as.size(), 2u) << "the server's window of 2, not 2 per stream";
    EXPECT_NE(as[0].stream, as[1].stream) << "one batch on each lane";
    for (const Assignment& a : as) {
      ++per_stream[a.stream];
      ASSERT_TRUE(s.CheckHeader(a.stream, Header(s, a.batch)).ok());
      ASSERT_TRUE(s.OnBatchReceived(a.stream, BatchFor(s, a.batch), now).ok());
    }
    for (int i = 0; i < 2; ++i) {
      Batch batch;
      bool end = false;
      ASSERT_TRUE(s.Take(&batch, &end).ok());
    }
    now += absl::Milliseconds(10);
  }
  ASSERT_EQ(per_stream.size(), 2u);
  EXPECT_EQ(per_stream.begin()->second, 5);
  EXPECT_EQ(per_stream.rbegin()->second, 5);
}

// One lane failing retires that stream only. Its batches go to other
// servers, not to the failing server's other lane (which finishes what it
// has); a server whose lanes all fail together backs off once, and its lanes
// reopen after that one backoff.
TEST(BatchSchedulerTest, AFailedLanesBatchesGoToOtherServersAndTheServerBacksOffOnce) {
  SchedulerOptions o = Options();
  o.streams_per_server = 2;
  o.window = 4;
  o.prefetch = 6;
  BatchScheduler s(EpochPlan(7, 0, 20, 2, false, 0, 1), o, nullptr);  // 10 batches
  std::map<StreamId, std::string> server_of;
  for (const std::string& a : s.OnMembership({"a:1", "b:1"}, kT0)) server_of[s.OnStreamOpened(a, kT0)] = a;
  ASSERT_EQ(server_of.size(), 4u);
  std::map<StreamId, int> load;
  for (const Assignment& a : s.Dispatch(kT0)) ++load[a.stream];
  StreamId a0 = -1, a1 = -1;
  for (const auto& [id, address] : server_of) {
    if (address == "a:1") (s.lane(id) == 0 ? a0 : a1) = id;
  }
  ASSERT_GT(load[a0], 0);
  const int lost = load[a0];
  s.OnStreamEnded(a0, StreamEnd::Ended(absl::UnavailableError("connection reset"), false), kT0);
  EXPECT_EQ(s.counts().reassigned, lost);
  for (const Assignment& a : s.Dispatch(kT0)) {
    EXPECT_EQ(server_of.at(a.stream), "b:1") << "batch " << a.batch << " went back to the failing server";
  }
  // The whole server goes: its other lane fails at the same moment.
  s.OnStreamEnded(a1, StreamEnd::Ended(absl::UnavailableError("connection reset"), false), kT0);
  // One failure, one backoff of at most reconnect_min (100 ms, jittered);
  // counting each lane would have doubled it.
  EXPECT_TRUE(s.OnMembership({"a:1", "b:1"}, kT0).empty());
  const std::vector<std::string> reopen = s.OnMembership({"a:1", "b:1"}, kT0 + o.reconnect_min);
  EXPECT_EQ(reopen, (std::vector<std::string>{"a:1", "a:1"}));
  EXPECT_EQ(s.FreeLane("a:1"), 0);
  EXPECT_EQ(s.lane(s.OnStreamOpened("a:1", kT0 + o.reconnect_min)), 0);
  EXPECT_EQ(s.lane(s.OnStreamOpened("a:1", kT0 + o.reconnect_min)), 1);
}

TEST(BatchSchedulerTest, WithOneServerTheFirstRefusalEndsTheEpoch) {
  BatchScheduler s(Plan(), Options(), nullptr);
  for (const std::string& a : s.OnMembership({"a:1"}, kT0)) s.OnStreamOpened(a, kT0);
  std::vector<Assignment> as = s.Dispatch(kT0);
  ASSERT_FALSE(as.empty());
  s.OnStreamEnded(as[0].stream, StreamEnd::Ended(absl::InvalidArgumentError("sample index 99 out of range"), true),
                  kT0);
  EXPECT_EQ(s.error().code(), absl::StatusCode::kInvalidArgument);
}

// A server that is unwell (not the batch) is retried, but not for ever.
TEST(BatchSchedulerTest, ABatchAttemptedTooOftenEndsTheEpoch) {
  SchedulerOptions o = Options();
  o.max_attempts = 4;
  BatchScheduler s(Plan(), o, nullptr);
  absl::Time now = kT0;
  for (int round = 0; round < 10 && s.error().ok(); ++round) {
    for (const std::string& a : s.OnMembership({"a:1", "b:1"}, now)) s.OnStreamOpened(a, now);
    for (const Assignment& a : s.Dispatch(now)) {
      if (a.batch == 0)
        s.OnStreamEnded(a.stream, StreamEnd::Ended(absl::UnavailableError("connection reset"), false), now);
    }
    now += absl::Seconds(5);
  }
  EXPECT_EQ(s.error().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.error().message().find("requested 4 times"), std::string::npos) << s.error();
}

TEST(BatchSchedulerTest, DrainingServerFinishesItsBatchesWithoutReassignment) {
  BatchScheduler s(Plan(), Options(), nullptr);
  for (const std::string& a : s.OnMembership({"a:1"}, kT0)) s.OnStreamOpened(a, kT0);
  std::vector<Assignment> as = s.Dispatch(kT0);
  ASSERT_EQ(as.size(), 2u);
  s.OnDraining(as[0].stream);
  EXPECT_TRUE(s.Dispatch(kT0).empty());  // no new work
  for (const Assignment& a : as) ASSERT_TRUE(s.OnBatchReceived(a.stream, BatchFor(s, a.batch), kT0).ok());
  EXPECT_EQ(s.TakeHalfCloses(), std::vector<StreamId>{as[0].stream});
  s.OnStreamEnded(as[0].stream, StreamEnd::Ended(absl::OkStatus(), true), kT0);
  EXPECT_EQ(s.counts().reassigned, 0);
}

TEST(BatchSchedulerTest, NoLiveServerForTheTimeoutIsUnavailableNamingThem) {
  SchedulerOptions o = Options();
  o.unavailable_timeout = absl::Seconds(3);
  BatchScheduler s(Plan(), o, nullptr);
  absl::Time now = kT0;
  s.OnMembership({"a:1"}, now);
  s.OnConnectFailed("a:1", "cannot connect");
  for (int i = 0; i < 50 && s.error().ok(); ++i) {
    s.Tick(now);
    now += absl::Milliseconds(100);
  }
  EXPECT_EQ(s.error().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.error().message().find("a:1 (cannot connect)"), std::string::npos) << s.error();
  EXPECT_LE(now - kT0, absl::Seconds(3.5));
}

TEST(BatchSchedulerTest, ServerThatLeavesTheSetIsDrained) {
  BatchScheduler s(Plan(), Options(), nullptr);
  for (const std::string& a : s.OnMembership({"a:1", "b:1"}, kT0)) s.OnStreamOpened(a, kT0);
  s.Dispatch(kT0);
  EXPECT_TRUE(s.OnMembership({"b:1"}, kT0).empty());
  for (const Assignment& a : s.Dispatch(kT0)) EXPECT_NE(a.stream, 0);  // a:1 (stream 0) gets nothing new
}

EpochPlan PlanOfEpoch(int64_t epoch) { return EpochPlan(7, epoch, 10, 2, false, 0, 1); }

// Issue 12: the next epoch's first batches are requested on the same stream
// while the current epoch drains, so its first batch is not a cold start.
TEST(BatchSchedulerTest, TheNextEpochIsRequestedOnTheSameStreamWhileTheCurrentOneDrains) {
  SchedulerOptions o = Options();
  o.window = 3;
  o.prefetch = 4;
  BatchScheduler s(Plan(), o, nullptr);
  ASSERT_TRUE(s.ArmEpoch(PlanOfEpoch(1)).ok());
  EXPECT_FALSE(s.ArmEpoch(PlanOfEpoch(3)).ok()) << "epochs are armed in order";
  for (const std::string& a : s.OnMembership({"a:1"}, kT0)) s.OnStreamOpened(a, kT0);
  std::vector<std::pair<int64_t, int64_t>> requested;  // (epoch, batch) in request order
  int64_t epoch0 = 0;
  for (int round = 0; round < 20 && epoch0 < 5; ++round) {
    for (const Assignment& a : s.Dispatch(kT0)) {
      EXPECT_EQ(a.stream, 0) << "one stream for both epochs";
      requested.emplace_back(a.epoch, a.batch);
      ASSERT_TRUE(s.CheckHeader(a.stream, Header(s, a.batch, a.epoch)).ok());
      ASSERT_TRUE(s.OnBatchReceived(a.stream, BatchFor(s, a.batch, a.epoch), kT0).ok());
    }
    Batch batch;
    bool end = false;
    while (s.CanTake() && epoch0 < 5) {
      ASSERT_TRUE(s.Take(&batch, &end).ok());
      ASSERT_FALSE(end);
      EXPECT_EQ(batch.epoch, 0);
      EXPECT_EQ(batch.batch_index, epoch0++);
    }
  }
  ASSERT_EQ(epoch0, 5);
  // Epoch 0's five batches first, then epoch 1's, before epoch 0 ended.
  ASSERT_GE(requested.size(), 6u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(requested[i], std::make_pair(int64_t{0}, static_cast<int64_t>(i)));
  EXPECT_EQ(requested[5], std::make_pair(int64_t{1}, int64_t{0}));
  Batch batch;
  bool end = false;
  ASSERT_TRUE(s.Take(&batch, &end).ok());
  EXPECT_TRUE(end) << "an epoch's batches only, even with the next one's ready";
  EXPECT_FALSE(s.Done());
  ASSERT_TRUE(s.CanAdvance());
  ASSERT_TRUE(s.AdvanceEpoch().ok());
  EXPECT_EQ(s.epoch(), 1);
  ASSERT_TRUE(s.CanTake()) << "epoch 1's first batch is there already";
  ASSERT_TRUE(s.Take(&batch, &end).ok());
  EXPECT_EQ(batch.epoch, 1);
  EXPECT_EQ(batch.batch_index, 0);
  int64_t next = -1;
  std::vector<int64_t> beyond;
  s.Position(&next, &beyond);
  EXPECT_EQ(next, 1) << "positions count within the current epoch";
  EXPECT_TRUE(beyond.empty());
  // Epoch 0 is gone: a late copy of one of its batches is refused.
  EXPECT_FALSE(s.CheckHeader(0, Header(s, 1, 1)).ok()) << "not requested";
  EXPECT_FALSE(s.AdvanceEpoch().ok()) << "epoch 1 is not handed over yet";
}

// Out of order, the next epoch's ready batches may fill the prefetch limit
// while a batch of the current epoch goes back to pending (its stream
// failed): that batch is requested anyway, or the epoch would never end.
TEST(BatchSchedulerTest, UnorderedCurrentBatchIsRequestedWhenTheNextEpochFillsThePrefetch) {
  SchedulerOptions o = Options();
  o.ordered = false;
  o.window = 4;
  o.prefetch = 4;
  BatchScheduler s(Plan(), o, nullptr);
  ASSERT_TRUE(s.ArmEpoch(PlanOfEpoch(1)).ok());
  absl::Time now = kT0;
  for (const std::string& a : s.OnMembership({"a:1", "b:1"}, now)) s.OnStreamOpened(a, now);
  Batch batch;
  bool end = false;
  // Deliver epoch 0's batches 0..3; batch 4 goes to one stream, which then fails
  // after the next epoch's batches filled everything else.
  int64_t lost_stream = -1;
  for (int round = 0; round < 10; ++round) {
    for (const Assignment& a : s.Dispatch(now)) {
      if (a.epoch == 0 && a.batch == 4) {
        lost_stream = a.stream;
        continue;
      }
      ASSERT_TRUE(s.OnBatchReceived(a.stream, BatchFor(s, a.batch, a.epoch), now).ok());
    }
    while (s.CanTake()) {
      ASSERT_TRUE(s.Take(&batch, &end).ok());
      ASSERT_FALSE(end);
    }
  }
  ASSERT_GE(lost_stream, 0);
  s.OnStreamEnded(lost_stream, StreamEnd::Ended(absl::UnavailableError("connection reset"), false), now);
  bool requested_again = false;
  for (const Assignment& a : s.Dispatch(now)) requested_again |= a.epoch == 0 && a.batch == 4;
  EXPECT_TRUE(requested_again);
}

}  // namespace
}  // namespace batch_scheduler_test
}  // namespace stoker

namespace stoker {
namespace batch_scheduler_test {  // the shared fixtures (batch_scheduler_test_util.h)
namespace {

// A server with another copy of the dataset refuses the session: its
// batches go to the others at once, and it gets no new stream before
// refused_retry.
TEST(BatchSchedulerTest, AServerThatRefusesTheSessionGetsNoStreamBeforeRefusedRetry) {
  SchedulerOptions o = Options();
  o.refused_retry = absl::Seconds(30);
  BatchScheduler s(Plan(), o, nullptr);
  std::map<std::string, StreamId> stream;
  for (const std::string& a : s.OnMembership({"a:1", "b:1"}, kT0)) stream[a] = s.OnStreamOpened(a, kT0);
  ASSERT_EQ(stream.size(), 2u);
  std::vector<Assignment> first = s.Dispatch(kT0);
  const auto on_a =
      std::count_if(first.begin(), first.end(), [&](const Assignment& x) { return x.stream == stream["a:1"]; });
  ASSERT_GT(on_a, 0);
  s.OnStreamEnded(stream["a:1"], StreamEnd::SessionRefused(absl::FailedPreconditionError("another copy: 1234 != 5678")),
                  kT0);
  for (const Assignment& x : s.Dispatch(kT0)) EXPECT_EQ(x.stream, stream["b:1"]) << "batch " << x.batch;
  EXPECT_TRUE(s.OnMembership({"a:1", "b:1"}, kT0 + absl::Seconds(29)).empty()) << "no new stream before refused_retry";
  EXPECT_EQ(s.OnMembership({"a:1", "b:1"}, kT0 + absl::Seconds(31)), std::vector<std::string>{"a:1"});
  EXPECT_TRUE(s.error().ok()) << s.error();
}

// A full server (admission) turns a lane away: its live lane keeps getting
// work, no new stream opens before the hint, nothing is blamed however often
// it happens, and a pool that stays full makes the run wait, not fail.
TEST(BatchSchedulerTest, AFullServerKeepsItsLiveLaneAndIsAskedAgainAfterTheHint) {
  SchedulerOptions o = Options();
  o.streams_per_server = 2;
  o.max_attempts = 2;
  o.unavailable_timeout = absl::Seconds(3);
  BatchScheduler s(Plan(), o, nullptr);
  absl::Time now = kT0;
  std::vector<StreamId> lanes;
  for (const std::string& a : s.OnMembership({"a:1"}, now)) lanes.push_back(s.OnStreamOpened(a, now));
  ASSERT_EQ(lanes.size(), 2u);
  std::vector<Assignment> first = s.Dispatch(now);
  ASSERT_FALSE(first.empty());
  const absl::Status full = absl::ResourceExhaustedError("server full: 1 streams open (--max-streams 1)");
  std::vector<Assignment> redispatched;
  for (int round = 0; round < 5; ++round) {  // lane 1 refused again and again
    s.OnStreamEnded(lanes[1], StreamEnd::ServerFull(full, absl::Seconds(2)), now);
    if (round == 0) {
      // Lane 1's batch goes to lane 0 at once: the server is not backing off.
      redispatched = s.Dispatch(now);
      ASSERT_EQ(redispatched.size(), 1u);
      EXPECT_EQ(redispatched[0].stream, lanes[0]);
    }
    EXPECT_TRUE(s.OnMembership({"a:1"}, now + absl::Seconds(1)).empty()) << "no new stream before the hint";
    const std::vector<std::string> again = s.OnMembership({"a:1"}, now + absl::Seconds(2));
    ASSERT_EQ(again.size(), 1u);
    lanes[1] = s.OnStreamOpened(again[0], now + absl::Seconds(2));
    now += absl::Seconds(2);
  }
  EXPECT_TRUE(s.error().ok()) << "a full server is not a failed batch: " << s.error();
  // The live lane still gets the work.
  std::set<int64_t> received;
  std::vector<Assignment> pending;
  for (const Assignment& a : first) {
    if (a.stream == lanes[0]) pending.push_back(a);  // lane 1's went back when it was turned away
  }
  pending.insert(pending.end(), redispatched.begin(), redispatched.end());
  for (int i = 0; i < 20 && !s.Done(); ++i) {
    std::vector<Assignment> more = s.Dispatch(now);
    pending.insert(pending.end(), more.begin(), more.end());
    std::vector<Assignment> now_pending;
    now_pending.swap(pending);
    for (const Assignment& a : now_pending) {
      if (a.stream != lanes[0] && a.stream != lanes[1]) continue;
      ASSERT_TRUE(s.CheckHeader(a.stream, Header(s, a.batch)).ok());
      ASSERT_TRUE(s.OnBatchReceived(a.stream, BatchFor(s, a.batch), now).ok());
      received.insert(a.batch);
    }
    now += absl::Milliseconds(10);
  }
  EXPECT_EQ(received.size(), 5u);

  // Every lane of the only server full for longer than unavailable_timeout:
  // the run waits for room.
  BatchScheduler t(Plan(), o, nullptr);
  now = kT0;
  for (int round = 0; round < 10; ++round) {
    for (const std::string& a : t.OnMembership({"a:1"}, now)) {
      t.OnStreamEnded(t.OnStreamOpened(a, now), StreamEnd::ServerFull(full, absl::Seconds(2)), now);
    }
    t.Tick(now);
    now += absl::Seconds(1);
  }
  EXPECT_TRUE(t.error().ok()) << t.error();
}

// Issue 33: with bounded fan-out only the chosen servers get streams and
// work; a chosen server that leaves is replaced by the next in the rank's
// order. (A batch refused by the whole subset widening it is exercised by
// the scheduler simulation's poisoned fan-out runs.)
TEST(BatchSchedulerTest, FanOutStreamsFromItsSubsetAndReplacesAServerThatLeaves) {
  SchedulerOptions o = Options();
  FanoutOptions f;
  f.key = "job/3/8";
  f.min_servers = 2;
  f.initial_servers = 2;
  f.max_servers = 2;
  o.fanout = f;
  o.prefetch = 100;  // by time instead: 2 x window x 2 servers before anything is measured
  BatchScheduler s(Plan(), o, nullptr);
  std::vector<std::string> pool;
  for (int i = 0; i < 8; ++i) pool.push_back("10.0.0." + std::to_string(i) + ":1");
  absl::Time now = kT0;
  std::vector<std::string> opened = s.OnMembership(pool, now);
  const std::vector<std::string> order = RendezvousOrder(f.key, pool);
  std::sort(opened.begin(), opened.end());
  std::vector<std::string> first_two{order[0], order[1]};
  std::sort(first_two.begin(), first_two.end());
  EXPECT_EQ(opened, first_two);
  EXPECT_EQ(s.ServersInUse(), first_two);
  EXPECT_EQ(s.prefetch(), 2 * 2 * 2);
  std::map<StreamId, std::string> address;
  for (const std::string& a : opened) address[s.OnStreamOpened(a, now)] = a;
  for (const Assignment& a : s.Dispatch(now)) {
    EXPECT_TRUE(address.count(a.stream)) << "work for a stream of a server outside the subset";
  }
  // order[0] leaves the set: its stream finishes what it has and closes;
  // order[2] takes its place.
  std::vector<std::string> without = pool;
  without.erase(std::find(without.begin(), without.end(), order[0]));
  const std::vector<std::string> next = s.OnMembership(without, now);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0], order[2]);
}

// "Also found" of the bad-input review: a client under an address-space
// limit that could not allocate ~1 GiB batches asked the servers again for
// ever. A batch this process cannot take ends the epoch at once, naming it,
// with no server blamed and nothing asked again.
TEST(BatchSchedulerTest, ABatchThisProcessCannotAllocateEndsTheEpochWithoutAskingAgain) {
  BatchScheduler s(Plan(), Options(), nullptr);
  for (const std::string& a : s.OnMembership({"a:1", "b:1"}, kT0)) s.OnStreamOpened(a, kT0);
  std::vector<Assignment> as = s.Dispatch(kT0);
  ASSERT_FALSE(as.empty());
  const absl::Status oom =
      absl::ResourceExhaustedError("this process cannot allocate batch 0 (1073741824 bytes and 0 of fields)");
  s.OnStreamEnded(as[0].stream, StreamEnd::LocalFailure(oom), kT0);
  ASSERT_FALSE(s.error().ok());
  EXPECT_EQ(s.error().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.error().message().find("cannot allocate batch 0"), std::string::npos) << s.error();
  EXPECT_TRUE(s.Dispatch(kT0 + absl::Seconds(60)).empty());  // nothing is asked again
  Batch batch;
  bool end = false;
  EXPECT_TRUE(s.CanTake());
  EXPECT_EQ(s.Take(&batch, &end).code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace batch_scheduler_test
}  // namespace stoker

namespace stoker {
namespace batch_scheduler_test {  // the shared fixtures (batch_scheduler_test_util.h)
namespace {

// Issue 50: in the shard-aware order a batch goes to its lane's server when
// that one has room; a busy or gone server's batches go to the others.
TEST(BatchSchedulerTest, ShardAwareBatchesGoToTheirLanesServerAndNeverWaitForAGoneOne) {
  ShardLayout layout;
  layout.sizes.assign(32, 10);  // 320 samples in 32 shards
  layout.window = 1;
  layout.lanes = 8;
  SchedulerOptions o = Options();
  o.window = 2;
  o.prefetch = 12;
  const EpochPlan plan(3, 0, 320, 5, false, 0, 1, true, &layout);  // 64 batches
  BatchScheduler s(plan, o, nullptr);
  const std::vector<std::string> servers{"a:1", "b:1", "c:1", "d:1"};
  std::map<StreamId, std::string> address_of;
  absl::Time now = kT0;
  std::mt19937_64 rng(11);
  std::vector<Assignment> outstanding;
  std::map<int64_t, std::map<std::string, int>> servers_of_lane;  // before the kill
  std::set<int64_t> taken;
  bool killed = false;
  for (int round = 0; round < 2000 && taken.size() < 64; ++round) {
    std::vector<std::string> members = servers;
    if (killed) members.pop_back();
    for (const std::string& a : s.OnMembership(members, now)) address_of[s.OnStreamOpened(a, now)] = a;
    for (const Assignment& a : s.Dispatch(now)) outstanding.push_back(a);
    ASSERT_FALSE(outstanding.empty()) << "round " << round << ": nothing requested, " << taken.size() << " taken";
    // Servers of equal speed finish in any order.
    const size_t i = static_cast<size_t>(rng() % outstanding.size());
    const Assignment a = outstanding[i];
    outstanding.erase(outstanding.begin() + static_cast<std::ptrdiff_t>(i));
    if (!killed && taken.size() >= 32 && address_of[a.stream] == "d:1") {
      // d dies with its batches; they and its lanes' later ones go elsewhere.
      killed = true;
      s.OnStreamEnded(a.stream, StreamEnd::Ended(absl::UnavailableError("killed"), false), now);
      outstanding.erase(std::remove_if(outstanding.begin(), outstanding.end(),
                                       [&](const Assignment& x) { return address_of[x.stream] == "d:1"; }),
                        outstanding.end());
      continue;
    }
    if (!killed) ++servers_of_lane[plan.BatchLane(a.batch)][address_of[a.stream]];
    ASSERT_TRUE(s.CheckHeader(a.stream, Header(s, a.batch)).ok());
    ASSERT_TRUE(s.OnBatchReceived(a.stream, BatchFor(s, a.batch), now).ok());
    while (s.CanTake()) {
      Batch batch;
      bool end = false;
      ASSERT_TRUE(s.Take(&batch, &end).ok());
      if (end) break;
      ASSERT_TRUE(taken.insert(batch.batch_index).second) << "batch " << batch.batch_index << " twice";
    }
    now += absl::Milliseconds(5);
  }
  EXPECT_EQ(taken.size(), 64u);
  EXPECT_TRUE(killed);
  // Before the kill nearly every batch went to its lane's server; after it,
  // d's two lanes went to the others.
  EXPECT_GT(s.counts().affinity_hits, 4 * s.counts().affinity_misses) << s.counts().affinity_hits << " hits";
  EXPECT_GT(s.counts().affinity_misses, 0) << "d's batches after it died";
  // Each of the 8 lanes had one server making most of its batches (servers
  // finishing in random order sometimes leave the head batch's server busy),
  // and the 4 servers two lanes each.
  ASSERT_EQ(servers_of_lane.size(), 8u);
  std::map<std::string, int> lanes_of_server;
  for (const auto& [lane, made] : servers_of_lane) {
    int total = 0, most = 0;
    std::string top;
    for (const auto& [server, n] : made) {
      total += n;
      if (n > most) most = n, top = server;
    }
    EXPECT_GE(most * 2, total + 1) << "lane " << lane;
    ++lanes_of_server[top];
  }
  for (const auto& [server, n] : lanes_of_server) EXPECT_EQ(n, 2) << server;
}

}  // namespace
}  // namespace batch_scheduler_test
}  // namespace stoker
