#include "client/bottleneck.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

v1::StageTimes Times(double server, double read, double compute) {
  v1::StageTimes t;
  t.set_server_seconds(server);
  t.set_read_seconds(read);
  t.set_decode_seconds(compute);
  return t;
}

// Feeds a meter with waits and batches, then judges everything since start.
Verdict Judge(double wait_ms, double h2d_ms, double latency_ms, v1::StageTimes t, const char* device_path = nullptr) {
  BottleneckMeter m(nullptr);
  if (device_path) m.SetDevicePath(device_path);
  for (int i = 0; i < 20; ++i) {
    m.OnWait(absl::Milliseconds(wait_ms));
    m.OnH2d(absl::Milliseconds(h2d_ms));
    m.OnBatch(t, absl::Milliseconds(latency_ms));
  }
  absl::SleepFor(absl::Milliseconds(50));  // a wall time: waits above are relative to it
  return m.EvaluateAll();
}

TEST(BottleneckTest, RuleNamesEachStage) {
  // 20 x 10 ms of waiting within about 50 ms of wall time: heavily starved.
  EXPECT_EQ(Judge(10, 0, 100, Times(0.01, 0.001, 0.02)).stage, "network");
  EXPECT_EQ(Judge(10, 0, 100, Times(0.09, 0.001, 0.02)).stage, "server_cpu");
  EXPECT_EQ(Judge(10, 0, 100, Times(0.09, 0.05, 0.02)).stage, "storage");
  EXPECT_EQ(Judge(1, 10, 100, Times(0.09, 0.001, 0.02)).stage, "h2d");
  EXPECT_EQ(Judge(0, 0, 100, Times(0.09, 0.001, 0.02)).stage, "none");
}

// Issue 31: the workers' time in the session's Python stages is its own
// stage: more than half of the worker compute names it, less leaves
// server_cpu; it counts as compute against storage.
TEST(BottleneckTest, PythonStagesThatDominateTheWorkersAreNamed) {
  v1::StageTimes t = Times(0.09, 0.001, 0.005);
  t.set_python_seconds(0.015);
  const Verdict v = Judge(10, 0, 100, t);
  EXPECT_EQ(v.stage, "python_transform");
  EXPECT_NEAR(v.compute_seconds, 0.02, 1e-9);
  EXPECT_NE(v.Explain().find("python 15.0 ms"), std::string::npos) << v.Explain();
  t.set_python_seconds(0.004);
  EXPECT_EQ(Judge(10, 0, 100, t).stage, "server_cpu");
  v1::StageTimes slow_read = Times(0.09, 0.012, 0.001);
  slow_read.set_python_seconds(0.010);  // read 12 ms vs compute 11 ms: storage
  EXPECT_EQ(Judge(10, 0, 100, slow_read).stage, "storage");
  slow_read.set_python_seconds(0.015);  // read 12 ms vs compute 16 ms, 15 of them Python
  EXPECT_EQ(Judge(10, 0, 100, slow_read).stage, "python_transform");
}

// Issue 12: on a machine without a GPU, staging is the CPU fallback's
// conversion on the training host; the verdict says so instead of blaming a
// PCIe copy that does not exist.
TEST(BottleneckTest, OnTheCpuFallbackStagingIsNamedHostConvert) {
  const Verdict v = Judge(1, 10, 100, Times(0.09, 0.001, 0.02), "cpu");
  EXPECT_EQ(v.stage, "host_convert");
  EXPECT_NE(v.Explain().find("host_convert"), std::string::npos) << v.Explain();
  EXPECT_EQ(v.Explain().find("h2d"), std::string::npos) << v.Explain();
  EXPECT_EQ(Judge(10, 0, 100, Times(0.01, 0.001, 0.02), "cpu").stage, "network");
  EXPECT_EQ(Judge(1, 10, 100, Times(0.09, 0.001, 0.02), "cuda").stage, "h2d");
}

// Issue 47: a job that waits to open its dataset while the servers copy it
// from object storage (a cold cache) is storage-bound, whatever its first
// batches' figures say; once most of the waiting is for batches, the usual
// rule applies again.
TEST(BottleneckTest, WaitingForTheStoresCopyIsStorage) {
  BottleneckMeter m(nullptr);
  m.OnStorageWait(absl::Milliseconds(300));
  for (int i = 0; i < 20; ++i) {
    m.OnWait(absl::Milliseconds(5));  // 100 ms of waiting for batches that a slow network limits
    m.OnBatch(Times(0.01, 0.001, 0.02), absl::Milliseconds(100));
  }
  absl::SleepFor(absl::Milliseconds(50));
  Verdict v = m.EvaluateAll();
  EXPECT_EQ(v.stage, "storage") << v.Explain();
  EXPECT_GT(v.storage_wait_ratio, 0);
  EXPECT_LE(v.storage_wait_ratio, v.starved_ratio);
  EXPECT_NE(v.Explain().find("waiting for the store's copy"), std::string::npos) << v.Explain();
  for (int i = 0; i < 60; ++i) m.OnWait(absl::Milliseconds(5));  // 300 more ms waiting for batches
  v = m.EvaluateAll();
  EXPECT_EQ(v.stage, "network") << v.Explain();
  // Without a storage wait the same figures are the network's.
  EXPECT_EQ(Judge(10, 0, 100, Times(0.01, 0.001, 0.02)).storage_wait_ratio, 0);
  EXPECT_EQ(Judge(10, 0, 100, Times(0.01, 0.001, 0.02)).Explain().find("store"), std::string::npos);
}

TEST(BottleneckTest, ExplainCarriesTheFigures) {
  const Verdict v = Judge(10, 0, 100, Times(0.01, 0.001, 0.02));
  EXPECT_EQ(v.batches, 20);
  EXPECT_NEAR(v.transfer_seconds, 0.09, 1e-9);
  EXPECT_NE(v.Explain().find("transfer 90.0 ms vs server 10.0 ms"), std::string::npos) << v.Explain();
}

}  // namespace
}  // namespace stoker
