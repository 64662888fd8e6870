#include "client/demand_meter.h"

#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace stoker {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(ServersNeededTest, DemandOverCapacityWithHeadroomRoundedUp) {
  EXPECT_EQ(ServersNeeded(3000, 1000), 4);  // 3.3 -> 4
  EXPECT_EQ(ServersNeeded(2700, 1000), 3);  // 2.97 -> 3
  EXPECT_EQ(ServersNeeded(1000, 1100), 1);  // 1.0 with headroom
  EXPECT_EQ(ServersNeeded(3000, 1100), 4);  // 3.0000000000000004 in doubles: as PromQL's ceil gives
  EXPECT_EQ(ServersNeeded(100, 1000), 1);
  EXPECT_EQ(ServersNeeded(3000, 1000, 1.0), 3);
  EXPECT_EQ(ServersNeeded(0, 1000), 0);  // no demand known
  EXPECT_EQ(ServersNeeded(1000, 0), 0);  // no capacity known
}

// A loop that waits `wait` in Next() and then steps for `step`, n times.
void Loop(DemandMeter& m, absl::Time& t, int n, absl::Duration wait, absl::Duration step, int images) {
  for (int i = 0; i < n; ++i) {
    const absl::Time called = t;
    t += wait;
    m.OnNext(called, t, images);
    t += step;
  }
}

TEST(DemandMeterTest, DemandIsImagesPerSecondOfStepNotOfWallTime) {
  prometheus::Registry registry;
  ClientMetrics metrics(registry);
  DemandMeter m(&metrics);
  absl::Time t = kT0;
  // 32 images per 10 ms step, while waiting 90 ms for each batch: the loop
  // gets 320 images/s but could take 3200.
  Loop(m, t, 200, absl::Milliseconds(90), absl::Milliseconds(10), 32);
  const DemandReport r = m.Report();
  EXPECT_NEAR(r.demand_images_per_second, 3200, 1);
  EXPECT_EQ(r.servers_needed, 0);  // no server capacity yet
  EXPECT_NEAR(metrics.demand_images_per_second->Value(), 3200, 1);
  EXPECT_EQ(metrics.consumed_images->Value(), 199 * 32);  // the first batch has no step before it
  EXPECT_NEAR(metrics.step_seconds->Value(), 199 * 0.010, 1e-6);
}

TEST(DemandMeterTest, ServersNeededFromTheMeanCapacityOfTheServersInTheSet) {
  DemandMeter m(nullptr);
  absl::Time t = kT0;
  Loop(m, t, 100, absl::Milliseconds(5), absl::Milliseconds(10), 27);  // 2700 images/s
  m.OnCapacity("a:1", 800);
  m.OnCapacity("b:1", 1200);
  m.OnCapacity("c:1", 0);  // not measured yet: ignored
  DemandReport r = m.Report();
  EXPECT_EQ(r.servers_reporting, 2);
  EXPECT_NEAR(r.mean_server_capacity, 1000, 1e-9);
  EXPECT_EQ(r.servers_needed, 3);  // ceil(1.1 x 2700 / 1000)
  m.OnCapacity("a:1", 1200);       // the latest figure counts
  m.ForgetServer("b:1");
  r = m.Report();
  EXPECT_EQ(r.servers_reporting, 1);
  EXPECT_EQ(r.servers_needed, 3);  // ceil(2.475)
  EXPECT_NE(r.Explain().find("2700 images/s"), std::string::npos) << r.Explain();
}

TEST(DemandMeterTest, StagingIsInputTimeNotStep) {
  DemandMeter m(nullptr);
  absl::Time t = kT0;
  for (int i = 0; i < 100; ++i) {
    m.OnNext(t, t, 10);
    m.OnStaged(absl::Milliseconds(30));  // the copy to the device
    t += absl::Milliseconds(40);         // 30 ms staging + 10 ms step
  }
  EXPECT_NEAR(m.Report().demand_images_per_second, 1000, 1);
}

TEST(DemandMeterTest, AStepConsumesThePreviousBatch) {
  DemandMeter m(nullptr);
  absl::Time t = kT0;
  m.OnNext(t, t, 32);
  t += absl::Milliseconds(10);
  m.OnNext(t, t, 4);  // a partial last batch: the step before it consumed the full one
  EXPECT_NEAR(m.Report().demand_images_per_second, 3200, 1e-6);
}

TEST(DemandMeterTest, PausesBetweenEpochsAndMidEpochAreNoSteps) {
  prometheus::Registry registry;
  ClientMetrics metrics(registry);
  DemandMeter m(&metrics);
  absl::Time t = kT0;
  Loop(m, t, 50, absl::ZeroDuration(), absl::Milliseconds(10), 10);  // 1000/s
  m.Pause();                                                         // end of epoch; then five minutes of evaluation
  t += absl::Minutes(5);
  Loop(m, t, 50, absl::ZeroDuration(), absl::Milliseconds(10), 10);
  EXPECT_NEAR(m.Report().demand_images_per_second, 1000, 1);
  t += absl::Minutes(2);  // a checkpoint mid-epoch: far longer than any step
  Loop(m, t, 50, absl::ZeroDuration(), absl::Milliseconds(10), 10);
  EXPECT_NEAR(m.Report().demand_images_per_second, 1000, 1);
  EXPECT_LT(metrics.step_seconds->Value(), 2.0);  // neither pause was counted
  // A loop that really slows down is followed (steps of 40 ms: 4x, not 10x).
  Loop(m, t, 1500, absl::ZeroDuration(), absl::Milliseconds(40), 10);
  EXPECT_NEAR(m.Report().demand_images_per_second, 250, 10);
}

TEST(DemandMeterTest, FollowsASlowerStep) {
  DemandMeter m(nullptr, absl::Seconds(5));
  absl::Time t = kT0;
  Loop(m, t, 500, absl::ZeroDuration(), absl::Milliseconds(10), 10);   // 1000/s
  Loop(m, t, 1500, absl::ZeroDuration(), absl::Milliseconds(40), 10);  // 250/s for 60 s
  EXPECT_NEAR(m.Report().demand_images_per_second, 250, 10);
}

}  // namespace
}  // namespace stoker
