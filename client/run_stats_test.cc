#include "client/run_stats.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(RunStatsTest, ThroughputStarvationAndInterBatchTimes) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  RunStats stats;
  stats.Start(t0);
  // Batch 1 after waiting 1 s; batch 2 at 2 s, no wait; batch 3 at 4 s after 1 s.
  stats.AddBatch(t0 + absl::Seconds(1), absl::Seconds(1), 10, 1000, absl::Milliseconds(5), "a");
  stats.AddBatch(t0 + absl::Seconds(2), absl::ZeroDuration(), 10, 1000, absl::Milliseconds(7), "b");
  stats.AddBatch(t0 + absl::Seconds(4), absl::Seconds(1), 10, 1000, absl::Milliseconds(9), "a");
  const RunSummary s = stats.Finish(t0 + absl::Seconds(5));
  EXPECT_EQ(s.batches, 3);
  EXPECT_EQ(s.images, 30);
  EXPECT_DOUBLE_EQ(s.seconds, 5);
  EXPECT_DOUBLE_EQ(s.images_per_second, 6);
  EXPECT_DOUBLE_EQ(s.megabytes_per_second, 3000 / 1e6 / 5);
  EXPECT_DOUBLE_EQ(s.starved_percent, 40);
  EXPECT_DOUBLE_EQ(s.inter_batch_p50_ms, 1000);
  EXPECT_DOUBLE_EQ(s.inter_batch_p90_ms, 2000);
  EXPECT_DOUBLE_EQ(s.inter_batch_p99_ms, 2000);
  EXPECT_DOUBLE_EQ(s.inter_batch_max_ms, 2000);
  EXPECT_DOUBLE_EQ(s.receive_latency_p50_ms, 7);
  EXPECT_EQ(s.batches_per_server.at("a"), 2);
  EXPECT_EQ(s.batches_per_server.at("b"), 1);
}

TEST(RunStatsTest, ServerWorkerTimeGivesImagesPerWorkerSecond) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  RunStats stats;
  stats.Start(t0);
  EXPECT_DOUBLE_EQ(stats.Finish(t0 + absl::Seconds(1)).server_images_per_worker_second, 0);  // no work yet
  stats.AddBatch(t0 + absl::Seconds(1), absl::ZeroDuration(), 10, 1000, absl::Milliseconds(5), "a");
  stats.AddServerWork(0.5);
  stats.AddBatch(t0 + absl::Seconds(2), absl::ZeroDuration(), 30, 1000, absl::Milliseconds(5), "a");
  stats.AddServerWork(1.5);
  const RunSummary s = stats.Finish(t0 + absl::Seconds(2));
  EXPECT_DOUBLE_EQ(s.server_worker_seconds, 2.0);
  EXPECT_DOUBLE_EQ(s.server_images_per_worker_second, 20.0);  // 40 images in 2 worker-seconds
}

TEST(RunStatsTest, PercentileByNearestRank) {
  EXPECT_EQ(Percentile({}, 0.5), 0);
  EXPECT_EQ(Percentile({3, 1, 2}, 0.5), 2);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_EQ(Percentile(hundred, 0.99), 99);
  EXPECT_EQ(Percentile(hundred, 1.0), 100);
  EXPECT_EQ(Percentile(hundred, 0.0), 1);
}

}  // namespace
}  // namespace stoker
