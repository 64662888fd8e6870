#include "dataplane/worker_pool.h"

#include <atomic>
#include <set>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

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
