// BatchScheduler against what servers send back: headers that disagree with
// the request, field regions, sample sizes, late copies.
#include <cstdint>
#include <limits>
#include <vector>

#include "client/batch_scheduler.h"
#include "client/batch_scheduler_test_util.h"
#include "gtest/gtest.h"

namespace stoker {
namespace batch_scheduler_test {  // the shared fixtures (batch_scheduler_test_util.h)
namespace {

// Review 1.7: the header is checked before any buffer is allocated.
TEST(BatchSchedulerTest, HeadersThatDisagreeWithTheRequestAreRefused) {
  BatchScheduler s(Plan(), Options(), nullptr);
  for (const std::string& a : s.OnMembership({"a:1"}, kT0)) s.OnStreamOpened(a, kT0);
  std::vector<Assignment> as = s.Dispatch(kT0);
  ASSERT_EQ(as.size(), 2u);  // the window
  const StreamId id = as[0].stream;
  EXPECT_TRUE(s.CheckHeader(id, Header(s, 0)).ok());
  struct Case {
    const char* what;
    std::function<void(v1::BatchHeader&)> edit;
  };
  const std::vector<Case> cases = {
      {"not requested", [](v1::BatchHeader& h) { h.set_batch_index(4); }},
      {"other epoch", [](v1::BatchHeader& h) { h.set_epoch(1); }},
      {"other indices", [](v1::BatchHeader& h) { h.set_sample_indices(0, h.sample_indices(0) + 1); }},
      {"missing index", [](v1::BatchHeader& h) { h.mutable_sample_indices()->RemoveLast(); }},
      {"missing label", [](v1::BatchHeader& h) { h.mutable_labels()->RemoveLast(); }},
      {"shape", [](v1::BatchHeader& h) { h.set_shape(1, 5); }},
      {"bytes", [](v1::BatchHeader& h) { h.set_total_bytes(int64_t{64} << 30); }},
      // Fields the session did not ask for (it asked for none).
      {"fields",
       [](v1::BatchHeader& h) {
         h.set_field_bytes(1);
         v1::FieldData* f = h.add_fields();
         f->set_name("caption");
         f->set_kind(v1::TEXT);
       }},
      {"field bytes", [](v1::BatchHeader& h) { h.set_field_bytes(7); }},
  };
  for (const Case& c : cases) {
    v1::BatchHeader h = Header(s, 0);
    c.edit(h);
    const absl::Status st = s.CheckHeader(id, h);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << c.what;
  }
}

// Fields: the header's region must be the session's fields, within the
// bound the session allows, so a hostile server cannot make the client
// allocate at will.
TEST(BatchSchedulerTest, FieldRegionsAreBoundedAndMustMatchTheSession) {
  SchedulerOptions o = Options();
  o.value_fields.resize(1);
  o.value_fields[0].set_name("caption");
  o.value_fields[0].set_kind(v1::TEXT);
  o.max_sample_field_bytes = 100;
  BatchScheduler s(Plan(), o, nullptr);
  for (const std::string& a : s.OnMembership({"a:1"}, kT0)) s.OnStreamOpened(a, kT0);
  const StreamId id = s.Dispatch(kT0)[0].stream;
  auto with_region = [&](int64_t bytes) {
    v1::BatchHeader h = Header(s, 0);
    h.set_field_bytes(bytes);
    v1::FieldData* f = h.add_fields();
    f->set_name("caption");
    f->set_kind(v1::TEXT);
    f->set_bytes(bytes);
    f->add_sample_offsets(0);
    f->add_sample_offsets(bytes / 2);
    f->add_sample_offsets(bytes);
    return h;
  };
  EXPECT_TRUE(s.CheckHeader(id, with_region(200)).ok());  // 2 samples x 100
  const absl::Status big = s.CheckHeader(id, with_region(int64_t{1} << 30));
  EXPECT_EQ(big.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(big.message().find("may have at most 200"), std::string::npos) << big;
  EXPECT_EQ(s.CheckHeader(id, Header(s, 0)).code(), absl::StatusCode::kDataLoss);  // the caption is missing
}

// Materialising sessions: each sample's size, adding up to total_bytes.
TEST(BatchSchedulerTest, VariableSampleSizesMustAddUpWithoutOverflow) {
  SchedulerOptions o = Options();
  o.sample_bytes = 0;
  o.sample_shape.clear();
  o.variable_samples = true;
  BatchScheduler s(Plan(), o, nullptr);
  for (const std::string& a : s.OnMembership({"a:1"}, kT0)) s.OnStreamOpened(a, kT0);
  const StreamId id = s.Dispatch(kT0)[0].stream;
  auto header = [&](std::vector<int64_t> sizes, int64_t total) {
    v1::BatchHeader h = Header(s, 0);
    h.clear_shape();
    h.add_shape(h.sample_indices_size());
    for (int64_t size : sizes) h.add_sample_sizes(size);
    h.set_total_bytes(total);
    return h;
  };
  EXPECT_TRUE(s.CheckHeader(id, header({7, 3}, 10)).ok());
  EXPECT_TRUE(s.CheckHeader(id, header({0, 10}, 10)).ok());  // a sample left out
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> bad = {
      {{7, 4}, 10}, {{7}, 7}, {{7, 3, 0}, 10}, {{-1, 11}, 10}, {{1000, kMax, kMax - 1000 + 12}, 10}, {{kMax, 2}, 10}};
  for (const auto& [sizes, total] : bad) {
    EXPECT_EQ(s.CheckHeader(id, header(sizes, total)).code(), absl::StatusCode::kDataLoss) << sizes.size();
  }
}

TEST(BatchSchedulerTest, ALateCopyOnTheOldStreamIsRefusedAndTheBatchIsDeliveredOnce) {
  BatchScheduler s(Plan(), Options(), nullptr);
  absl::Time now = kT0;
  for (const std::string& a : s.OnMembership({"a:1", "b:1"}, now)) s.OnStreamOpened(a, now);
  std::vector<Assignment> as = s.Dispatch(now);
  const Assignment first = as[0];
  // Its stream is given up (timeout); the batch goes elsewhere.
  now += absl::Seconds(121);
  std::vector<StreamId> cancelled = s.Tick(now);
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_GT(s.counts().reassigned, 0);
  // The old stream's copy arrives late: refused.
  EXPECT_FALSE(s.CheckHeader(cancelled[0], Header(s, first.batch)).ok());
  EXPECT_FALSE(s.OnBatchReceived(cancelled[0], BatchFor(s, first.batch), now).ok());
}

}  // namespace
}  // namespace batch_scheduler_test
}  // namespace stoker
