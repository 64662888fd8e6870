#include "dataplane/sessions/batch_cache.h"

#include <memory>

#include "dataplane/sessions/admission.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

FinishedBatch Made(int64_t bytes, char fill = 'x') {
  FinishedBatch b;
  b.header.set_batch_index(1);
  b.data = std::make_shared<const std::string>(static_cast<size_t>(bytes), fill);
  return b;
}

v1::BatchRequest Request(int64_t epoch, std::vector<int64_t> indices) {
  v1::BatchRequest r;
  r.set_epoch(epoch);
  r.set_batch_index(0);
  for (int64_t i : indices) r.add_sample_indices(i);
  return r;
}

TEST(BatchCacheTest, TheFirstAskerMakesOthersWaitAndLaterOnesHit) {
  BatchCache cache(1000, nullptr);
  FinishedBatch hit;
  EXPECT_EQ(cache.Lookup("k", &hit, nullptr), BatchCache::Outcome::kMake);
  int waited = 0;
  std::string got;
  EXPECT_EQ(cache.Lookup("k", &hit, [&](const FinishedBatch* b) { ++waited, got = *b->data; }),
            BatchCache::Outcome::kJoined);
  FinishedBatch made = Made(10, 'a');
  cache.Finish("k", &made);
  EXPECT_EQ(waited, 1);
  EXPECT_EQ(got, std::string(10, 'a'));
  ASSERT_EQ(cache.Lookup("k", &hit, nullptr), BatchCache::Outcome::kHit);
  EXPECT_EQ(hit.data, made.data) << "the kept buffer is shared, not copied";
  EXPECT_EQ(cache.bytes(), 10);
}

TEST(BatchCacheTest, AMakerThatGivesUpHandsTheBatchToOneWaiterAndTheOthersWaitForIt) {
  BatchCache cache(1000, nullptr);
  FinishedBatch hit;
  ASSERT_EQ(cache.Lookup("k", &hit, nullptr), BatchCache::Outcome::kMake);
  bool told_to_make = false;
  ASSERT_EQ(cache.Lookup("k", &hit, [&](const FinishedBatch* b) { told_to_make = b == nullptr; }),
            BatchCache::Outcome::kJoined);
  std::string second_got;
  ASSERT_EQ(cache.Lookup("k", &hit, [&](const FinishedBatch* b) { second_got = b ? *b->data : "null"; }),
            BatchCache::Outcome::kJoined);
  cache.Finish("k", nullptr);
  EXPECT_TRUE(told_to_make);
  EXPECT_EQ(second_got, "") << "still waiting for the new maker";
  EXPECT_EQ(cache.Lookup("k", &hit, [](const FinishedBatch*) {}), BatchCache::Outcome::kJoined)
      << "a new asker waits for the new maker too";
  FinishedBatch made = Made(5, 'm');
  cache.Finish("k", &made);  // the new maker is done
  EXPECT_EQ(second_got, "mmmmm");
  EXPECT_EQ(cache.Lookup("k", &hit, nullptr), BatchCache::Outcome::kHit);
  // A maker giving up with nobody waiting leaves nothing behind.
  ASSERT_EQ(cache.Lookup("j", &hit, nullptr), BatchCache::Outcome::kMake);
  cache.Finish("j", nullptr);
  EXPECT_EQ(cache.Lookup("j", &hit, nullptr), BatchCache::Outcome::kMake);
}

TEST(BatchCacheTest, FailedBatchesReachWaitersButAreNotKept) {
  BatchCache cache(1000, nullptr);
  FinishedBatch hit;
  ASSERT_EQ(cache.Lookup("k", &hit, nullptr), BatchCache::Outcome::kMake);
  absl::Status seen;
  cache.Lookup("k", &hit, [&](const FinishedBatch* b) { seen = b->status; });
  FinishedBatch failed = Made(10);
  failed.status = absl::DataLossError("sample 3 is corrupt");
  cache.Finish("k", &failed);
  EXPECT_EQ(seen.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(cache.Lookup("k", &hit, nullptr), BatchCache::Outcome::kMake);
}

TEST(BatchCacheTest, TheLeastRecentlyUsedBatchesLeaveAtTheByteBound) {
  BatchCache cache(25, nullptr);
  FinishedBatch hit;
  for (const char* k : {"a", "b"}) {
    ASSERT_EQ(cache.Lookup(k, &hit, nullptr), BatchCache::Outcome::kMake);
    FinishedBatch made = Made(10);
    cache.Finish(k, &made);
  }
  ASSERT_EQ(cache.Lookup("a", &hit, nullptr), BatchCache::Outcome::kHit);  // a is now the most recent
  ASSERT_EQ(cache.Lookup("c", &hit, nullptr), BatchCache::Outcome::kMake);
  FinishedBatch made = Made(10);
  cache.Finish("c", &made);
  EXPECT_EQ(cache.bytes(), 20);
  EXPECT_EQ(cache.Lookup("a", &hit, nullptr), BatchCache::Outcome::kHit);
  EXPECT_EQ(cache.Lookup("b", &hit, nullptr), BatchCache::Outcome::kMake) << "b was the least recently used";
  cache.Finish("b", nullptr);
  FinishedBatch huge = Made(100);
  ASSERT_EQ(cache.Lookup("h", &hit, nullptr), BatchCache::Outcome::kMake);
  cache.Finish("h", &huge);
  EXPECT_EQ(cache.bytes(), 20) << "a batch larger than the bound is not kept";
}

TEST(BatchCacheTest, KeysFollowWhatDecidesTheBytesOnly) {
  v1::SessionConfig a;
  a.set_dataset("ds");
  a.set_seed(1);
  a.add_pipeline()->mutable_center_crop()->set_size(32);
  a.set_job("sweep-1");
  v1::SessionConfig b = a;
  b.set_job("sweep-2");
  b.set_weight(3);
  b.set_expected_fingerprint("xxh3:0");
  EXPECT_EQ(BatchCache::SessionKey(a, "xxh3:1"), BatchCache::SessionKey(b, "xxh3:1"));
  EXPECT_NE(BatchCache::SessionKey(a, "xxh3:1"), BatchCache::SessionKey(a, "xxh3:2")) << "another copy";
  v1::SessionConfig seed = a;
  seed.set_seed(2);
  EXPECT_NE(BatchCache::SessionKey(a, "f"), BatchCache::SessionKey(seed, "f"));
  v1::SessionConfig crop = a;
  crop.mutable_pipeline(0)->mutable_center_crop()->set_size(64);
  EXPECT_NE(BatchCache::SessionKey(a, "f"), BatchCache::SessionKey(crop, "f"));
  const std::string k = BatchCache::SessionKey(a, "f");
  EXPECT_NE(BatchCache::BatchKey(k, Request(0, {1, 2})), BatchCache::BatchKey(k, Request(1, {1, 2})));
  EXPECT_NE(BatchCache::BatchKey(k, Request(0, {1, 2})), BatchCache::BatchKey(k, Request(0, {1, 3})));
  EXPECT_NE(BatchCache::BatchKey(k, Request(0, {1, 23})), BatchCache::BatchKey(k, Request(0, {12, 3})));
}

TEST(AdmissionTest, StreamAndJobLimitsRefuseWithAHintAndFreeOnRelease) {
  Admission admission({/*max_sessions=*/2, /*max_streams=*/3});
  auto a1 = admission.Admit("a");
  auto a2 = admission.Admit("a");
  auto b1 = admission.Admit("b");
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  auto c1 = admission.Admit("c");
  EXPECT_EQ(c1.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c1.status().message().find("--max-streams 3"), std::string::npos) << c1.status();
  EXPECT_NE(c1.status().message().find("retry in"), std::string::npos) << c1.status();
  a2->reset();
  auto c2 = admission.Admit("c");
  EXPECT_EQ(c2.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c2.status().message().find("--max-sessions 2"), std::string::npos) << c2.status();
  auto a3 = admission.Admit("a");  // a job already served may add a stream
  EXPECT_TRUE(a3.ok()) << a3.status();
  a1->reset();
  a3->reset();
  EXPECT_EQ(admission.jobs(), 1);
  EXPECT_TRUE(admission.Admit("c").ok());
}

TEST(AdmissionTest, NoLimitsAdmitEverything) {
  Admission admission({});
  std::vector<std::unique_ptr<Admission::Ticket>> tickets;
  for (int i = 0; i < 100; ++i) {
    auto t = admission.Admit(std::to_string(i));
    ASSERT_TRUE(t.ok());
    tickets.push_back(*std::move(t));
  }
  EXPECT_EQ(admission.streams(), 100);
}

}  // namespace
}  // namespace stoker
