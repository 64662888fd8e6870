#include "dataplane/base/capacity_meter.h"

#include "dataplane/base/server_metrics.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace stoker {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(CapacityMeterTest, WorkersOverWorkerSecondsPerSample) {
  prometheus::Gauge gauge;
  CapacityMeter meter(&gauge);
  EXPECT_EQ(meter.ImagesPerSecond(), 0);  // nothing measured yet
  meter.SetWorkers(4);
  // 10 ms of worker time per sample: one worker makes 100/s, four 400/s.
  for (int i = 0; i < 50; ++i) meter.Add(32, absl::Milliseconds(320), kT0 + absl::Milliseconds(100 * i));
  EXPECT_NEAR(meter.ImagesPerSecond(), 400, 1e-6);
  EXPECT_NEAR(gauge.Value(), 400, 1e-6);
}

TEST(CapacityMeterTest, FollowsACostlierPipeline) {
  CapacityMeter meter(nullptr, absl::Seconds(10));
  meter.SetWorkers(1);
  absl::Time t = kT0;
  for (int i = 0; i < 30; ++i, t += absl::Seconds(1)) meter.Add(100, absl::Seconds(1), t);  // 100/s
  for (int i = 0; i < 100; ++i, t += absl::Seconds(1)) meter.Add(25, absl::Seconds(1), t);  // 4x the cost
  EXPECT_NEAR(meter.ImagesPerSecond(), 25, 1);
}

TEST(CapacityMeterTest, IgnoresEmptyReports) {
  CapacityMeter meter(nullptr);
  meter.Add(0, absl::Seconds(1), kT0);
  meter.Add(10, absl::ZeroDuration(), kT0);
  EXPECT_EQ(meter.ImagesPerSecond(), 0);
}

TEST(CapacityMeterTest, ExportedByServerMetrics) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry);
  metrics.capacity->SetWorkers(2);
  metrics.capacity->Add(10, absl::Seconds(1), kT0);
  bool found = false;
  for (const auto& family : registry.Collect()) {
    if (family.name != "stoker_server_capacity_images_per_second") continue;
    found = true;
    ASSERT_EQ(family.metric.size(), 1u);
    EXPECT_NEAR(family.metric[0].gauge.value, 20, 1e-9);
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace stoker
