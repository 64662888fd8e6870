// Test helper: takes the running epoch's batches from a StokerClient to the
// end and returns how many there were, or the first error Next gave.
#ifndef STOKER_TESTS_TESTDATA_DRAIN_EPOCH_H_
#define STOKER_TESTS_TESTDATA_DRAIN_EPOCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "client/stoker_client.h"

namespace stoker::testing {

inline absl::StatusOr<int64_t> DrainEpoch(StokerClient& client) {
  for (int64_t batches = 0;; ++batches) {
    Batch batch;
    bool end = false;
    if (absl::Status s = client.Next(&batch, &end); !s.ok()) return s;
    if (end) return batches;
  }
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_DRAIN_EPOCH_H_
