#include "common/log_queue.h"

#include <thread>

#include "gtest/gtest.h"

namespace stoker {
namespace {

void Send(LogQueue& q, google::LogSeverity severity, const std::string& text) {
  q.send(severity, "/src/x/file.cc", "file.cc", 42, nullptr, text.data(), text.size());
}

TEST(LogQueueTest, RecordsArriveInOrderWithTheirSource) {
  LogQueue q;
  Send(q, google::GLOG_WARNING, "first");
  Send(q, google::GLOG_ERROR, "second");
  std::vector<LogRecord> got;
  ASSERT_TRUE(q.Take(absl::Seconds(1), &got));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].message, "first");
  EXPECT_EQ(got[0].severity, google::GLOG_WARNING);
  EXPECT_EQ(got[0].file, "file.cc");
  EXPECT_EQ(got[0].line, 42);
  EXPECT_EQ(got[1].message, "second");
}

TEST(LogQueueTest, AFullQueueDropsAndSaysHowMany) {
  LogQueue q(/*capacity=*/2);
  for (int i = 0; i < 5; ++i) Send(q, google::GLOG_WARNING, "m");
  std::vector<LogRecord> got;
  ASSERT_TRUE(q.Take(absl::Seconds(1), &got));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].message, "3 log records were dropped (the queue was full)");
}

TEST(LogQueueTest, TakeWaitsForARecordAndCloseEndsIt) {
  LogQueue q;
  std::vector<LogRecord> got;
  EXPECT_TRUE(q.Take(absl::Milliseconds(20), &got));  // times out, still open
  EXPECT_TRUE(got.empty());
  std::thread sender([&] {
    absl::SleepFor(absl::Milliseconds(50));
    Send(q, google::GLOG_WARNING, "late");
  });
  ASSERT_TRUE(q.Take(absl::Seconds(10), &got));
  sender.join();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message, "late");
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    q.Close();
  });
  got.clear();
  EXPECT_FALSE(q.Take(absl::Seconds(10), &got));
  closer.join();
  Send(q, google::GLOG_WARNING, "after close");
  EXPECT_FALSE(q.Take(absl::Milliseconds(1), &got));
  EXPECT_TRUE(got.empty());
}

TEST(LogQueueTest, InstalledQueueReceivesGlogsMessagesAtItsLevel) {
  LogQueue& q = InstallProcessLogQueue(google::GLOG_WARNING);
  LOG(INFO) << "below the level";
  LOG(WARNING) << "at the level";
  std::vector<LogRecord> got;
  ASSERT_TRUE(q.Take(absl::Seconds(1), &got));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].message, "at the level");
  EXPECT_EQ(got[0].file, "log_queue_test.cc");
  FLAGS_minloglevel = 0;
}

}  // namespace
}  // namespace stoker
