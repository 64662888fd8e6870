// Per-batch timing of a training loop fed by Stoker, as stoker-bench records
// it: when each batch was handed over, how long the loop waited for it, its
// receive latency and the server's stage times. Periodic stalls (a slow
// batch every epoch boundary, every N batches) show here when averages hide
// them; tests/bench/plot_timeline.py turns the CSV into a PNG timeline.
// Thread-compatible.
#ifndef STOKER_CLIENT_BATCH_TIMELINE_H_
#define STOKER_CLIENT_BATCH_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/batch.h"

namespace stoker {

struct BatchTiming {
  int64_t epoch = 0;
  int64_t batch = 0;
  std::string server;
  double at_s = 0;            // handed over, seconds since the run started
  double inter_batch_ms = 0;  // since the previous hand-over (or the start)
  double wait_ms = 0;         // how long the loop waited in Next()
  double receive_ms = 0;      // request sent to last byte received
  double h2d_ms = 0;          // staging to the device (or the CPU fallback's conversion)
  // Server-side stage times (the batch header's StageTimes).
  double queue_ms = 0, read_ms = 0, decode_ms = 0, augment_ms = 0, assemble_ms = 0, server_ms = 0;
  double python_ms = 0;  // the session's Python transform stages (worker time, summed over samples)
};

class BatchTimeline {
 public:
  explicit BatchTimeline(absl::Time start) : start_(start), last_(start) {}

  // One batch handed over at `delivered` after waiting `waited`; returns its
  // record (e.g. to add the staging time).
  BatchTiming& Add(absl::Time delivered, absl::Duration waited, const Batch& batch);

  const std::vector<BatchTiming>& batches() const { return batches_; }
  // The `k` batches with the longest inter-batch times, longest first.
  std::vector<BatchTiming> Slowest(size_t k) const;
  // Writes every record: JSON (an array of objects) when `path` ends in
  // .json, CSV with a header line otherwise.
  absl::Status Write(const std::string& path) const;
  // One line for a report: "epoch E batch B from S: 120.3 ms (waited ...)".
  static std::string Describe(const BatchTiming& t);

 private:
  absl::Time start_, last_;
  std::vector<BatchTiming> batches_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_BATCH_TIMELINE_H_
