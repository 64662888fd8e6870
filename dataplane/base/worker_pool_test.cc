#include "dataplane/base/worker_pool.h"

#include <atomic>
#include <set>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

// Two shares whose tasks cost `cost_a` and `cost_b` (sleeps) keep one worker
// busy; returns share a's part of the worker time spent in [settle, settle +
// window). Tasks are re-queued as they finish, so both always want more.
double ShareOfA(double weight_a, double weight_b, absl::Duration cost_a, absl::Duration cost_b, absl::Duration settle,
                absl::Duration window) {
  // Declared before the pool, which runs what is queued when destroyed.
  std::atomic<bool> stop{false};
  std::function<void(WorkerPool::Share*, absl::Duration)> add;
  WorkerPool pool(1);
  auto a = pool.Join("a", weight_a);
  auto b = pool.Join("b", weight_b);
  add = [&](WorkerPool::Share* share, absl::Duration cost) {
    pool.Schedule(share, [&, share, cost] {
      if (stop.load()) return;
      absl::SleepFor(cost);
      if (!stop.load()) add(share, cost);
    });
  };
  for (int i = 0; i < 4; ++i) {
    add(a.get(), cost_a);
    add(b.get(), cost_b);
  }
  absl::SleepFor(settle);
  const auto before = pool.WorkerSeconds();
  absl::SleepFor(window);
  const auto after = pool.WorkerSeconds();
  stop.store(true);
  const double da = after.at("a") - before.at("a"), db = after.at("b") - before.at("b");
  return da / (da + db);
}

TEST(WorkerPoolTest, SharesSplitWorkerTimeEquallyWhateverTheirTasksCost) {
  // b's tasks cost 4x a's: first come first served would give b ~80 %.
  const double a =
      ShareOfA(1, 1, absl::Milliseconds(1), absl::Milliseconds(4), absl::Milliseconds(200), absl::Milliseconds(800));
  EXPECT_GT(a, 0.45);
  EXPECT_LT(a, 0.55);
}

TEST(WorkerPoolTest, WeightsSplitWorkerTimeInProportion) {
  const double a =
      ShareOfA(3, 1, absl::Milliseconds(4), absl::Milliseconds(1), absl::Milliseconds(200), absl::Milliseconds(800));
  EXPECT_GT(a, 0.65);
  EXPECT_LT(a, 0.85);
}

TEST(WorkerPoolTest, AnIdleShareEarnsNoCredit) {
  // a works alone for a while; once b arrives, b does not get the worker to
  // itself to "catch up": they split it.
  std::atomic<bool> stop{false};
  std::function<void(WorkerPool::Share*)> add;
  WorkerPool pool(1);
  auto a = pool.Join("a", 1);
  add = [&](WorkerPool::Share* share) {
    pool.Schedule(share, [&, share] {
      if (stop.load()) return;
      absl::SleepFor(absl::Milliseconds(2));
      if (!stop.load()) add(share);
    });
  };
  add(a.get());
  absl::SleepFor(absl::Milliseconds(400));
  auto b = pool.Join("b", 1);
  add(b.get());
  const auto before = pool.WorkerSeconds();
  absl::SleepFor(absl::Milliseconds(300));
  const auto after = pool.WorkerSeconds();
  stop.store(true);
  const double da = after.at("a") - before.at("a"), db = after.at("b") - before.at("b");
  EXPECT_GT(da / (da + db), 0.35) << "a was starved while b caught up";
}

TEST(WorkerPoolTest, ASharesNameAndTimeAreReportedAndItGoesWhenLeftAndIdle) {
  std::vector<std::pair<std::string, absl::Duration>> seen;
  absl::Mutex mu;
  {
    WorkerPool pool(1, [&](const std::string& share, absl::Duration worked) {
      absl::MutexLock lock(&mu);
      seen.emplace_back(share, worked);
    });
    {
      auto job = pool.Join("job-1", 2);
      absl::Notification ran;
      pool.Schedule(job.get(), [&] {
        absl::SleepFor(absl::Milliseconds(5));
        ran.Notify();
      });
      ran.WaitForNotification();
      absl::SleepFor(absl::Milliseconds(20));  // the observer runs after the task
      EXPECT_EQ(pool.WorkerSeconds().count("job-1"), 1u);
    }
    EXPECT_EQ(pool.WorkerSeconds().count("job-1"), 0u) << "left and idle: forgotten";
  }
  absl::MutexLock lock(&mu);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, "job-1");
  EXPECT_GE(seen[0].second, absl::Milliseconds(5));
}

TEST(WorkerPoolTest, RunsEveryTaskOnItsThreadsBeforeDestruction) {
  std::atomic<int> ran{0};
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  {
    WorkerPool pool(3);
    EXPECT_EQ(pool.num_threads(), 3);
    for (int i = 0; i < 200; ++i) {
      pool.Schedule([&] {
        ++ran;
        absl::MutexLock lock(&mu);
        ids.insert(std::this_thread::get_id());
      });
    }
  }
  EXPECT_EQ(ran.load(), 200);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
  EXPECT_LE(ids.size(), 3u);
}

TEST(WorkerPoolTest, QueueDepthCountsWaitingTasks) {
  absl::Notification release;
  WorkerPool pool(1);
  pool.Schedule([&] { release.WaitForNotification(); });
  for (int i = 0; i < 5; ++i) pool.Schedule([] {});
  // The blocker may or may not have been picked up yet.
  EXPECT_GE(pool.QueueDepth(), 5);
  release.Notify();
}

}  // namespace
}  // namespace stoker
