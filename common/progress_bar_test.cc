#include "common/progress_bar.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(ProgressBarTest, BarAndLineCarryTheFigures) {
  ProgressFigures p{450, 1000, 812.34, absl::Seconds(41), "samples", "3 failed"};
  EXPECT_EQ(ProgressBar(p, 20), "[#########...........] 450/1000  45.0%  812.3 samples/s  ETA 0:00:41  3 failed");
  EXPECT_EQ(ProgressLine(p), "450/1000 samples (45.0%), 812.3 samples/s, ETA 0:00:41, 3 failed");
}

TEST(ProgressBarTest, EdgesStayInTheBar) {
  EXPECT_EQ(ProgressBar({0, 0, 0, absl::InfiniteDuration(), "samples", ""}, 4),
            "[....] 0/0  0.0%  0.0 samples/s  ETA ?");
  EXPECT_EQ(ProgressBar({7, 5, 1, absl::ZeroDuration(), "shards", ""}, 4),
            "[####] 7/5  100.0%  1.0 shards/s  ETA 0:00:00");
  EXPECT_EQ(FormatEta(absl::Hours(2) + absl::Minutes(3) + absl::Seconds(4)), "2:03:04");
}

TEST(ProgressBarTest, ProgressStyleFollowsTheFlagAndTheTerminal) {
  EXPECT_EQ(*ParseProgressStyle("auto", true), ProgressStyle::kBar);
  EXPECT_EQ(*ParseProgressStyle("auto", false), ProgressStyle::kLog);
  EXPECT_EQ(*ParseProgressStyle("bar", false), ProgressStyle::kBar);
  EXPECT_EQ(*ParseProgressStyle("log", true), ProgressStyle::kLog);
  EXPECT_EQ(*ParseProgressStyle("none", true), ProgressStyle::kNone);
  const absl::StatusOr<ProgressStyle> bad = ParseProgressStyle("fancy", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'fancy'"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace stoker
