#include "common/rng.h"

#include <set>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(RngTest, SameSeedsGiveSameStream) {
  Rng a = Rng::ForSample(7, 3, 11), b = Rng::ForSample(7, 3, 11);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(), b.Next());
}

TEST(RngTest, EachSeedComponentChangesTheStream) {
  const uint64_t base = Rng::ForSample(7, 3, 11).Next();
  EXPECT_NE(base, Rng::ForSample(8, 3, 11).Next());
  EXPECT_NE(base, Rng::ForSample(7, 4, 11).Next());
  EXPECT_NE(base, Rng::ForSample(7, 3, 12).Next());
  EXPECT_NE(base, Rng::ForEpoch(7, 3).Next());
}

TEST(RngTest, UniformIntCoversInclusiveRangeOnly) {
  Rng rng(1);
  std::set<int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = rng.UniformInt(-2, 3);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 3);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 6u);
}

TEST(RngTest, UniformDoubleIsInUnitIntervalWithSensibleMean) {
  Rng rng(2);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double v = rng.UniformDouble();
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    sum += v;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

}  // namespace
}  // namespace stoker
