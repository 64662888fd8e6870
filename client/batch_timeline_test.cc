#include "client/batch_timeline.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

Batch BatchOf(int64_t epoch, int64_t index, double server_s) {
  Batch b;
  b.epoch = epoch;
  b.batch_index = index;
  b.server = "127.0.0.1:1";
  b.receive_latency = absl::Milliseconds(7);
  b.stage_times.set_decode_seconds(0.004);
  b.stage_times.set_server_seconds(server_s);
  return b;
}

TEST(BatchTimelineTest, RecordsInterBatchTimesAndFindsTheSlowest) {
  const absl::Time t0 = absl::UnixEpoch();
  BatchTimeline timeline(t0);
  timeline.Add(t0 + absl::Milliseconds(30), absl::Milliseconds(2), BatchOf(0, 0, 0.01));
  timeline.Add(t0 + absl::Milliseconds(60), absl::Milliseconds(1), BatchOf(0, 1, 0.01)).h2d_ms = 3;
  timeline.Add(t0 + absl::Milliseconds(360), absl::Milliseconds(290), BatchOf(1, 0, 0.2));  // a stall
  timeline.Add(t0 + absl::Milliseconds(390), absl::Milliseconds(1), BatchOf(1, 1, 0.01));
  ASSERT_EQ(timeline.batches().size(), 4u);
  EXPECT_DOUBLE_EQ(timeline.batches()[2].inter_batch_ms, 300);
  EXPECT_DOUBLE_EQ(timeline.batches()[2].at_s, 0.36);
  EXPECT_DOUBLE_EQ(timeline.batches()[1].h2d_ms, 3);
  const std::vector<BatchTiming> slowest = timeline.Slowest(2);
  ASSERT_EQ(slowest.size(), 2u);
  EXPECT_EQ(slowest[0].epoch, 1);
  EXPECT_EQ(slowest[0].batch, 0);
  EXPECT_DOUBLE_EQ(slowest[0].server_ms, 200);
  EXPECT_NE(BatchTimeline::Describe(slowest[0]).find("epoch 1 batch 0 from 127.0.0.1:1: 300.0 ms (waited 290.0"),
            std::string::npos)
      << BatchTimeline::Describe(slowest[0]);
  EXPECT_EQ(timeline.Slowest(10).size(), 4u);
}

TEST(BatchTimelineTest, WritesCsvAndJson) {
  testing::TempDir dir;
  const absl::Time t0 = absl::UnixEpoch();
  BatchTimeline timeline(t0);
  timeline.Add(t0 + absl::Milliseconds(30), absl::Milliseconds(2), BatchOf(0, 0, 0.01));
  timeline.Add(t0 + absl::Milliseconds(45), absl::Milliseconds(1), BatchOf(0, 1, 0.02));
  const std::string csv = (dir.path() / "t.csv").string(), json = (dir.path() / "t.json").string();
  ASSERT_TRUE(timeline.Write(csv).ok());
  ASSERT_TRUE(timeline.Write(json).ok());
  std::ifstream in(csv);
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  EXPECT_EQ(header.rfind("epoch,batch,server,at_s,inter_batch_ms,wait_ms,", 0), 0u) << header;
  EXPECT_EQ(first.rfind("0,0,127.0.0.1:1,0.030,30.000,2.000,7.000,", 0), 0u) << first;
  std::ifstream jin(json);
  const nlohmann::json j = nlohmann::json::parse(jin);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["batch"], 1);
  EXPECT_DOUBLE_EQ(j[1]["inter_batch_ms"].get<double>(), 15);
  EXPECT_DOUBLE_EQ(j[1]["server_ms"].get<double>(), 20);
  EXPECT_FALSE(timeline.Write((dir.path() / "missing" / "t.csv").string()).ok());
}

}  // namespace
}  // namespace stoker
