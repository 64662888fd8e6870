// Test helpers for sessions on an in-process DataServiceCore: start a
// session and make one batch, and read one sample's values of a field from
// the batch's field region. Header-only; thread-compatible.
#ifndef STOKER_TESTS_TESTDATA_ONE_BATCH_H_
#define STOKER_TESTS_TESTDATA_ONE_BATCH_H_

#include <cstring>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/field_layout.h"
#include "dataplane/sessions/data_service_core.h"
#include "gtest/gtest.h"

namespace stoker::testing {

// The batch of `indices` in a new session for `config` (a failed start is a
// test failure and an empty batch).
inline FinishedBatch MakeOneBatch(DataServiceCore& core, const v1::SessionConfig& config,
                                  const std::vector<int64_t>& indices) {
  auto session = core.StartSession(config);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  v1::BatchRequest request;
  for (int64_t i : indices) request.add_sample_indices(i);
  absl::Notification done;
  FinishedBatch out;
  const absl::Status submitted = (*session)->Submit(request, [&](FinishedBatch b) {
    out = std::move(b);
    done.Notify();
  });
  EXPECT_TRUE(submitted.ok()) << submitted;
  if (submitted.ok()) done.WaitForNotification();
  return out;
}

// Sample `sample`'s values of field `field` as T (int32_t, float, uint8_t).
template <typename T>
std::vector<T> FieldValues(const FinishedBatch& b, int field, int sample) {
  const absl::string_view region = absl::string_view(*b.data).substr(static_cast<size_t>(b.header.total_bytes()));
  const absl::string_view v = FieldValue(b.header.fields(field), region, sample);
  std::vector<T> out(v.size() / sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size());
  return out;
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_ONE_BATCH_H_
