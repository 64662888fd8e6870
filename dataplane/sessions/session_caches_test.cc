#include "dataplane/sessions/session_caches.h"

#include <memory>
#include <string>

#include "dataplane/sessions/memory_budget.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

std::shared_ptr<const std::string> Bytes(int64_t n, char c) {
  return std::make_shared<const std::string>(static_cast<size_t>(n), c);
}

TEST(SessionCachesTest, RawSlotsAreIndexModuloSlotsAndTheirBytesComeFromTheBudget) {
  MemoryBudget budget(1 << 20);
  {
    SessionCaches caches(&budget, 1 << 20, "test");
    EXPECT_EQ(caches.FindRaw(3), nullptr);
    caches.KeepRaw(3, Bytes(100, 'a'));
    ASSERT_NE(caches.FindRaw(3), nullptr);
    EXPECT_EQ(*caches.FindRaw(3 + SessionCaches::kSlots), std::string(100, 'a'));  // the same slot
    EXPECT_EQ(caches.FindRaw(4), nullptr);                                         // not full: another slot is a miss
    caches.KeepRaw(3 + SessionCaches::kSlots, Bytes(50, 'b'));                     // a filled slot is not replaced
    EXPECT_EQ(*caches.FindRaw(3), std::string(100, 'a'));
    EXPECT_EQ(budget.used(), 100);
  }
  EXPECT_EQ(budget.used(), 0) << "the bytes go back to the budget with the caches";
}

TEST(SessionCachesTest, PastTheSessionLimitTheCacheIsFullAndMissesReuseFilledSlots) {
  MemoryBudget budget(1 << 20);
  SessionCaches caches(&budget, 250, "test");
  caches.KeepRaw(0, Bytes(100, 'a'));
  caches.KeepRaw(1, Bytes(100, 'b'));
  caches.KeepRaw(2, Bytes(100, 'c'));  // 300 > 250: refused, the cache is now full
  EXPECT_EQ(budget.used(), 200);
  const std::shared_ptr<const std::string> reused = caches.FindRaw(2);
  ASSERT_NE(reused, nullptr) << "a full cache answers every sample from a filled slot";
  EXPECT_TRUE(*reused == std::string(100, 'a') || *reused == std::string(100, 'b'));
  caches.KeepRaw(5, Bytes(1, 'd'));  // full: nothing more is kept
  EXPECT_EQ(budget.used(), 200);
}

TEST(SessionCachesTest, TheServersBudgetSaysNoToo) {
  MemoryBudget budget(150);
  SessionCaches caches(&budget, 1 << 20, "test");
  cv::Mat image(10, 5, CV_8UC3, cv::Scalar(1, 2, 3));  // 150 bytes
  caches.KeepDecoded(7, image);
  EXPECT_FALSE(caches.FindDecoded(7).empty());
  caches.KeepDecoded(8, image);  // the budget has nothing left
  EXPECT_EQ(budget.used(), 150);
  EXPECT_EQ(caches.FindDecoded(8).total(), image.total()) << "full: slot 7's image";
}

TEST(SessionCachesTest, TheBatchCacheKeepsTheFirstBatchForBatchesOfItsSize) {
  MemoryBudget budget(1 << 20);
  SessionCaches caches(&budget, 1 << 20, "test");
  EXPECT_EQ(caches.FindBatch(4), nullptr);
  caches.KeepBatch(Bytes(40, 'x'), 4);
  caches.KeepBatch(Bytes(40, 'y'), 4);  // the first stays
  ASSERT_NE(caches.FindBatch(4), nullptr);
  EXPECT_EQ((*caches.FindBatch(4))[0], 'x');
  EXPECT_EQ(caches.FindBatch(3), nullptr) << "a batch of another size is made";
}

}  // namespace
}  // namespace stoker
