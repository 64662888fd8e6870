#include "common/decaying_ratio.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(DecayingRatioTest, ZeroUntilSomethingIsAdded) {
  DecayingRatio r(absl::Seconds(20));
  EXPECT_EQ(r.Value(), 0);
  r.Add(5, 0, kT0);  // no denominator yet
  EXPECT_EQ(r.Value(), 0);
}

TEST(DecayingRatioTest, SteadyInputGivesItsRatio) {
  DecayingRatio r(absl::Seconds(20));
  for (int i = 0; i < 100; ++i) r.Add(32, 0.5, kT0 + absl::Seconds(i));  // 32 images per 0.5 s
  EXPECT_NEAR(r.Value(), 64, 1e-9);
}

TEST(DecayingRatioTest, FollowsAChangeWithinAFewHalfLives) {
  DecayingRatio r(absl::Seconds(10));
  absl::Time t = kT0;
  for (int i = 0; i < 60; ++i, t += absl::Seconds(1)) r.Add(100, 1, t);  // 100/s
  for (int i = 0; i < 10; ++i, t += absl::Seconds(1)) r.Add(25, 1, t);   // then 25/s
  const double after_one_half_life = r.Value();
  EXPECT_LT(after_one_half_life, 75);  // already moved most of the way down
  EXPECT_GT(after_one_half_life, 25);
  for (int i = 0; i < 100; ++i, t += absl::Seconds(1)) r.Add(25, 1, t);  // ten half-lives on
  EXPECT_NEAR(r.Value(), 25, 0.5);
}

TEST(DecayingRatioTest, KeepsItsValueWhileIdleAndTimeNeverRunsBackwards) {
  DecayingRatio r(absl::Seconds(10));
  r.Add(10, 2, kT0);
  r.Add(10, 2, kT0 + absl::Hours(1));  // an idle hour: the old sums decay away, the ratio stays
  EXPECT_NEAR(r.Value(), 5, 1e-9);
  r.Add(30, 2, kT0);  // an earlier time counts as the last one (no growth)
  EXPECT_NEAR(r.Value(), 10, 1e-6);
}

}  // namespace
}  // namespace stoker
