// Fixtures the BatchScheduler tests share: options with a small window and
// prefetch, a 10-sample plan in batches of 2, and the header and batch a
// server would send for batch b. Test-only.
#ifndef STOKER_CLIENT_BATCH_SCHEDULER_TEST_UTIL_H_
#define STOKER_CLIENT_BATCH_SCHEDULER_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "client/batch_scheduler.h"

namespace stoker {
namespace batch_scheduler_test {

inline constexpr int64_t kSampleBytes = 4;
inline const absl::Time kT0 = absl::UnixEpoch() + absl::Hours(1);

inline SchedulerOptions Options() {
  SchedulerOptions o;
  o.window = 2;
  o.prefetch = 8;
  o.sample_bytes = kSampleBytes;
  o.sample_shape = {4};
  o.jitter_seed = 1;
  o.final_epoch = 0;  // single-epoch runs: streams half-close when it is received
  return o;
}

// 10 samples in batches of 2: 5 batches.
inline EpochPlan Plan() {
  return EpochPlan(/*seed=*/7, /*epoch=*/0, /*num_samples=*/10, /*batch_size=*/2, false, 0, 1);
}

inline v1::BatchHeader Header(const BatchScheduler& s, int64_t b, int64_t epoch = 0) {
  v1::BatchHeader h;
  h.set_epoch(epoch);
  h.set_batch_index(b);
  const std::vector<int64_t> indices = s.SampleIndices(epoch, b);
  for (int64_t i : indices) {
    h.add_sample_indices(i);
    h.add_labels(static_cast<int32_t>(i % 3));
  }
  h.add_shape(static_cast<int64_t>(indices.size()));
  h.add_shape(4);
  h.set_total_bytes(static_cast<int64_t>(indices.size()) * kSampleBytes);
  return h;
}

inline Batch BatchFor(const BatchScheduler& s, int64_t b, int64_t epoch = 0) {
  Batch batch;
  batch.epoch = epoch;
  batch.batch_index = b;
  batch.sample_indices = s.SampleIndices(epoch, b);
  batch.data = HostBuffer(batch.sample_indices.size() * kSampleBytes);
  return batch;
}

}  // namespace batch_scheduler_test
}  // namespace stoker

#endif  // STOKER_CLIENT_BATCH_SCHEDULER_TEST_UTIL_H_
