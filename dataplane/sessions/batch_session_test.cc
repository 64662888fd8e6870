// BatchSession's diagnostic caches (review 1.4): a server flag turns them
// off, and their memory is bounded per session and counted in the server's
// budget until the session ends.
#include "dataplane/sessions/data_service_core.h"

#include <memory>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace stoker {
namespace {

constexpr int64_t kSide = 64;
constexpr int64_t kDecodedBytes = kSide * kSide * 3;  // one decoded synthetic image

class BatchSessionCacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<DataServiceCore> Core(CoreConfig c) {
    c.workers = 2;
    return std::make_unique<DataServiceCore>(c, &metrics_);
  }

  static v1::SessionConfig Config(v1::CacheMode mode) {
    v1::SessionConfig c;
    c.set_dataset("synthetic:64x64:256:4");
    c.set_batch_size(64);
    c.set_cache_mode(mode);
    c.add_pipeline()->mutable_center_crop()->set_size(32);
    return c;
  }

  // Runs one batch of samples first..first+63 and returns its status (and
  // its header in *header when given).
  static absl::Status RunBatch(BatchSession& session, int64_t first, v1::BatchHeader* header = nullptr) {
    v1::BatchRequest request;
    request.set_batch_index(first / 64);
    for (int64_t i = first; i < first + 64; ++i) request.add_sample_indices(i);
    absl::Notification done;
    absl::Status status;
    absl::Status submitted = session.Submit(request, [&](FinishedBatch batch) {
      status = batch.status;
      if (header) *header = batch.header;
      done.Notify();
    });
    if (!submitted.ok()) return submitted;
    done.WaitForNotification();
    return status;
  }

  prometheus::Registry registry_;
  ServerMetrics metrics_{registry_};
};

TEST_F(BatchSessionCacheTest, CacheModesAreRefusedWhenTheServerTurnsThemOff) {
  CoreConfig c;
  c.allow_cache_modes = false;
  auto core = Core(c);
  for (v1::CacheMode mode : {v1::CACHE_BATCH, v1::CACHE_DECODED, v1::CACHE_RAW}) {
    DataServiceCore::SessionOrError session = core->StartSession(Config(mode));
    ASSERT_FALSE(session.ok()) << v1::CacheMode_Name(mode);
    EXPECT_TRUE(absl::IsFailedPrecondition(session.status())) << session.status();
    EXPECT_NE(session.status().message().find("--allow-cache-modes"), std::string::npos) << session.status();
  }
  EXPECT_TRUE(core->StartSession(Config(v1::CACHE_NONE)).ok());
}

TEST_F(BatchSessionCacheTest, DecodedCacheIsCountedInTheBudgetAndReturnedWithTheSession) {
  auto core = Core(CoreConfig{});
  {
    DataServiceCore::SessionOrError session = core->StartSession(Config(v1::CACHE_DECODED));
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE(RunBatch(**session, 0).ok());
    // Samples 0..63 fill all 64 slots.
    EXPECT_EQ(core->budget().used(), 64 * kDecodedBytes);
    ASSERT_TRUE(RunBatch(**session, 64).ok());
    EXPECT_EQ(core->budget().used(), 64 * kDecodedBytes);
  }
  EXPECT_EQ(core->budget().used(), 0);
}

TEST_F(BatchSessionCacheTest, DecodedCacheStopsAtItsLimitAndLaterSamplesReuseFilledSlots) {
  CoreConfig c;
  c.max_cache_bytes_per_session = 3 * kDecodedBytes;
  auto core = Core(c);
  DataServiceCore::SessionOrError session = core->StartSession(Config(v1::CACHE_DECODED));
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE(RunBatch(**session, 0).ok());
  ASSERT_TRUE(RunBatch(**session, 64).ok());
  EXPECT_EQ(core->budget().used(), 3 * kDecodedBytes);
  // Once full, no sample decodes again: the decode stage's count stands still.
  const double decodes = metrics_.decode_seconds->Collect().histogram.sample_count;
  ASSERT_TRUE(RunBatch(**session, 128).ok());
  EXPECT_EQ(metrics_.decode_seconds->Collect().histogram.sample_count, decodes);
}

TEST_F(BatchSessionCacheTest, RawCacheTakesFromTheServerBudgetUntilItIsUsedUp) {
  CoreConfig c;
  c.max_inflight_bytes = 8000;  // room for a few encoded 64x64 JPEGs, not 64
  auto core = Core(c);
  {
    DataServiceCore::SessionOrError session = core->StartSession(Config(v1::CACHE_RAW));
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE(RunBatch(**session, 0).ok());
    ASSERT_TRUE(RunBatch(**session, 64).ok());
    EXPECT_GT(core->budget().used(), 0);
    EXPECT_LE(core->budget().used(), 8000);
  }
  EXPECT_EQ(core->budget().used(), 0);
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

// The capacity the header carries and the gauge shows is workers over the
// measured worker time per sample; the test delay is worker time.
TEST_F(BatchSessionCacheTest, BatchesCarryTheServersCapacityFromMeasuredWorkerTime) {
  CoreConfig c;
  c.sample_delay = absl::Milliseconds(10);  // >= 10 ms per sample: 2 workers make <= 200/s
  auto core = Core(c);
  DataServiceCore::SessionOrError session = core->StartSession(Config(v1::CACHE_NONE));
  ASSERT_TRUE(session.ok()) << session.status();
  v1::BatchHeader header;
  ASSERT_TRUE(RunBatch(**session, 0, &header).ok());
  const double capacity = header.stage_times().capacity_images_per_second();
  EXPECT_GT(capacity, 100);  // the delay dominates a 64x64 decode
  EXPECT_LE(capacity, 200);
  EXPECT_DOUBLE_EQ(metrics_.capacity->ImagesPerSecond(), capacity);
}

// Samples a cancellation skipped took no work: they must not inflate the
// capacity (each client's disconnect cancels what it had queued).
TEST_F(BatchSessionCacheTest, CancelledSamplesDoNotFeedTheCapacity) {
  CoreConfig c;
  c.sample_delay = absl::Milliseconds(50);  // >= 50 ms per sample: 2 workers make <= 40/s
  auto core = Core(c);
  DataServiceCore::SessionOrError session = core->StartSession(Config(v1::CACHE_NONE));
  ASSERT_TRUE(session.ok()) << session.status();
  v1::BatchRequest request;
  for (int64_t i = 0; i < 64; ++i) request.add_sample_indices(i);
  absl::Notification done;
  ASSERT_TRUE((*session)->Submit(request, [&](FinishedBatch) { done.Notify(); }).ok());
  absl::SleepFor(absl::Milliseconds(120));  // a few samples made, most still queued
  (*session)->Cancel();
  done.WaitForNotification();
  EXPECT_GT(metrics_.capacity->ImagesPerSecond(), 0);     // the samples made count
  EXPECT_LE(metrics_.capacity->ImagesPerSecond(), 40.5);  // the skipped ones do not
}

// A diagnostic cache skips the work: it must not inflate the capacity.
TEST_F(BatchSessionCacheTest, CacheModesDoNotFeedTheCapacity) {
  auto core = Core(CoreConfig{});
  DataServiceCore::SessionOrError session = core->StartSession(Config(v1::CACHE_BATCH));
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE(RunBatch(**session, 0).ok());
  ASSERT_TRUE(RunBatch(**session, 0).ok());
  EXPECT_EQ(metrics_.capacity->ImagesPerSecond(), 0);
}

}  // namespace
}  // namespace stoker
