#include "common/epoch_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(EpochPlanTest, OrderIsAPermutation) {
  EpochPlan plan(42, 0, 1000, 64, false);
  std::vector<int64_t> sorted = plan.order();
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(1000);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected);
  EXPECT_NE(plan.order(), expected) << "not shuffled";
}

TEST(EpochPlanTest, DeterministicPerSeedAndEpoch) {
  EXPECT_EQ(EpochPlan(1, 2, 100, 8, false).order(), EpochPlan(1, 2, 100, 8, false).order());
  EXPECT_NE(EpochPlan(1, 2, 100, 8, false).order(), EpochPlan(1, 3, 100, 8, false).order());
  EXPECT_NE(EpochPlan(1, 2, 100, 8, false).order(), EpochPlan(9, 2, 100, 8, false).order());
}

TEST(EpochPlanTest, SequentialIsIndexOrderEveryEpochAndSplitsByRank) {
  std::vector<int64_t> expected(10);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(EpochPlan(1, 0, 10, 4, false, 0, 1, /*shuffle=*/false).order(), expected);
  EXPECT_EQ(EpochPlan(7, 3, 10, 4, false, 0, 1, /*shuffle=*/false).order(), expected);
  EXPECT_EQ(EpochPlan(1, 0, 10, 4, false, 0, 1, /*shuffle=*/false).BatchIndices(2), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(EpochPlan(1, 0, 10, 4, false, 1, 3, /*shuffle=*/false).order(), (std::vector<int64_t>{1, 4, 7, 0}));
}

struct BatchCase {
  int64_t samples, batch;
  bool drop_last;
  int64_t batches, last_size;
};

TEST(EpochPlanTest, BatchSplits) {
  const BatchCase cases[] = {
      {10, 4, false, 3, 2}, {10, 4, true, 2, 4}, {8, 4, false, 2, 4}, {3, 4, false, 1, 3}, {3, 4, true, 0, 0},
  };
  for (const BatchCase& c : cases) {
    EpochPlan plan(0, 0, c.samples, c.batch, c.drop_last);
    ASSERT_EQ(plan.num_batches(), c.batches) << c.samples << "/" << c.batch << " drop_last=" << c.drop_last;
    if (c.batches > 0) {
      EXPECT_EQ(static_cast<int64_t>(plan.BatchIndices(c.batches - 1).size()), c.last_size);
    }
  }
}

TEST(EpochPlanTest, BatchesTileTheOrder) {
  EpochPlan plan(5, 1, 50, 7, false);
  std::vector<int64_t> joined;
  for (int64_t b = 0; b < plan.num_batches(); ++b) {
    for (int64_t i : plan.BatchIndices(b)) joined.push_back(i);
  }
  EXPECT_EQ(joined, plan.order());
}

TEST(EpochPlanTest, RanksShareTheEpochLikeDistributedSampler) {
  // 10 samples, world 3: padded to 12 (two repeats) without drop_last,
  // cut to 9 with it.
  const EpochPlan whole(4, 2, 10, 2, false);
  std::multiset<int64_t> padded, cut;
  for (int rank = 0; rank < 3; ++rank) {
    const EpochPlan plan(4, 2, 10, 2, false, rank, 3);
    ASSERT_EQ(plan.order().size(), 4u);
    for (size_t k = 0; k < 4; ++k) EXPECT_EQ(plan.order()[k], whole.order()[(rank + 3 * k) % 10]);
    padded.insert(plan.order().begin(), plan.order().end());
    const EpochPlan dropped(4, 2, 10, 2, true, rank, 3);
    ASSERT_EQ(dropped.order().size(), 3u);
    cut.insert(dropped.order().begin(), dropped.order().end());
  }
  EXPECT_EQ(padded.size(), 12u);
  EXPECT_EQ(std::set<int64_t>(padded.begin(), padded.end()).size(), 10u);  // every sample, two twice
  EXPECT_EQ(std::set<int64_t>(cut.begin(), cut.end()).size(), 9u);         // no repeats
}

// Load-bearing: the epoch order and the split over ranks (see RngTest.PinnedValuesOfTheStream).
TEST(EpochPlanTest, PinnedOrderAndRankSplit) {
  EpochPlan p(42, 0, 16, 4, false, 0, 1);
  EXPECT_EQ(p.order(), (std::vector<int64_t>{12, 6, 9, 2, 7, 10, 14, 0, 11, 3, 15, 8, 1, 5, 13, 4}));
  EpochPlan q(42, 1, 10, 3, false, 1, 2);
  ASSERT_EQ(q.num_batches(), 2);
  EXPECT_EQ(q.BatchIndices(0), (std::vector<int64_t>{5, 4, 0}));
  EXPECT_EQ(q.BatchIndices(1), (std::vector<int64_t>{6, 7}));
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

// Issue 50: the shard-aware order reads one window of shards at a time.
ShardLayout Shards(int count, int64_t size, int window) {
  ShardLayout l;
  l.sizes.assign(static_cast<size_t>(count), size);
  l.sizes.back() = size / 2 + 1;  // a short last shard, as tar shards have
  l.window = window;
  return l;
}

int64_t ShardOf(const ShardLayout& l, int64_t index) {
  for (size_t s = 0; s < l.sizes.size(); ++s) {
    if (index < l.sizes[s]) return static_cast<int64_t>(s);
    index -= l.sizes[s];
  }
  return -1;
}

TEST(ShardAwareOrderTest, APermutationDeterministicPerSeedAndEpochWhoseBatchesEachComeFromOneWindow) {
  ShardLayout layout = Shards(40, 100, 4);  // 10 windows of 4 shards
  layout.lanes = 3;
  int64_t n = 0;
  for (int64_t s : layout.sizes) n += s;
  EpochPlan plan(7, 3, n, 64, false, 0, 1, true, &layout);
  ASSERT_TRUE(plan.shard_aware());
  std::vector<int64_t> sorted = plan.order();
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_EQ(EpochPlan(7, 3, n, 64, false, 0, 1, true, &layout).order(), plan.order());
  EXPECT_NE(EpochPlan(7, 4, n, 64, false, 0, 1, true, &layout).order(), plan.order());
  EXPECT_NE(EpochPlan(8, 3, n, 64, false, 0, 1, true, &layout).order(), plan.order());
  // Each window's samples come from its 4 shards (the window of a sample is
  // fixed), a batch from one window but where a lane's window ends, and
  // consecutive batches from different lanes.
  std::map<int64_t, std::set<int64_t>> shards_of_window;
  int straddling = 0, same_as_previous = 0;
  int64_t previous = -1;
  for (int64_t b = 0; b < plan.num_batches(); ++b) {
    std::set<int64_t> windows_of_batch;
    const std::vector<int64_t> indices = plan.BatchIndices(b);
    const int64_t w = plan.BatchWindow(b);
    for (int64_t i : indices) shards_of_window[w].insert(ShardOf(layout, i));
    std::set<int64_t> shards;
    for (int64_t i : indices) shards.insert(ShardOf(layout, i));
    if (shards.size() > 4) ++straddling;
    same_as_previous += w == previous;
    previous = w;
  }
  EXPECT_LE(straddling, 10);       // at most one per window's end
  EXPECT_LE(same_as_previous, 3);  // only where fewer lanes are left at the end
  int windows = 0;
  for (const auto& [w, shards] : shards_of_window) windows += !shards.empty();
  EXPECT_EQ(windows, 10);
  // Shuffled within a window: not the shards' own order.
  EXPECT_FALSE(std::is_sorted(plan.order().begin(), plan.order().begin() + 64));
}

TEST(ShardAwareOrderTest, RanksShareItAsTheyShareTheGlobalOrderAndABadLayoutFallsBack) {
  const ShardLayout layout = Shards(9, 50, 2);
  int64_t n = 0;
  for (int64_t s : layout.sizes) n += s;
  std::vector<int64_t> all;
  for (int r = 0; r < 3; ++r) {
    EpochPlan plan(1, 0, n, 8, /*drop_last=*/true, r, 3, true, &layout);
    EXPECT_EQ(plan.order().size(), static_cast<size_t>(n / 3));
    all.insert(all.end(), plan.order().begin(), plan.order().end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());  // no sample twice over the ranks
  EXPECT_EQ(all.size(), static_cast<size_t>(n / 3 * 3));
  // Sizes that do not add up, or no shuffle: the global order, unchanged.
  ShardLayout wrong = layout;
  wrong.sizes.push_back(1);
  EXPECT_EQ(EpochPlan(1, 0, n, 8, false, 0, 1, true, &wrong).order(), EpochPlan(1, 0, n, 8, false).order());
  EXPECT_FALSE(EpochPlan(1, 0, n, 8, false, 0, 1, true, &wrong).shard_aware());
  EXPECT_EQ(EpochPlan(1, 0, n, 8, false, 0, 1, false, &layout).order(),
            EpochPlan(1, 0, n, 8, false, 0, 1, false).order());
  EXPECT_EQ(EpochPlan(1, 0, n, 8, false).BatchWindow(0), -1);
  // Sizes from the network that would overflow a sum are refused, not wrapped.
  ShardLayout huge = MakeShardLayout({INT64_MAX, INT64_MAX, 2}, 0);
  EXPECT_FALSE(LayoutCovers(huge, 1));
  EXPECT_TRUE(LayoutCovers(MakeShardLayout({2, 3}, 0), 5));
  EXPECT_EQ(MakeShardLayout({5}, 0).window, kDefaultShardWindow);
  EXPECT_EQ(EffectiveShardWindow(false, true, 0), EffectiveShardWindow(false, true, kDefaultShardWindow));
  EXPECT_EQ(EffectiveShardWindow(false, false, 8), 0);
  EXPECT_EQ(EffectiveShardWindow(true, true, 8), 0);
}

}  // namespace
}  // namespace stoker
