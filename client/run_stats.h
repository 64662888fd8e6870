// Throughput and starvation figures of a training loop fed by Stoker, as
// stoker-bench reports them. Thread-compatible value type.
#ifndef STOKER_CLIENT_RUN_STATS_H_
#define STOKER_CLIENT_RUN_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace stoker {

struct RunSummary {
  int64_t batches = 0;
  int64_t images = 0;
  int64_t bytes = 0;
  double seconds = 0;
  double images_per_second = 0;
  double megabytes_per_second = 0;  // 1 MB = 1e6 bytes
  double starved_percent = 0;       // share of wall time spent waiting for data
  double inter_batch_p50_ms = 0;
  double inter_batch_p90_ms = 0;
  double inter_batch_p99_ms = 0;
  double inter_batch_max_ms = 0;
  double receive_latency_p50_ms = 0;
  // The servers' worker time for these batches (read + decode + augment +
  // assemble, summed over samples) and the images per second of it: what one
  // server worker core makes, whatever the transport and the client cost.
  double server_worker_seconds = 0;
  double server_images_per_worker_second = 0;
  std::map<std::string, int64_t> batches_per_server;
};

class RunStats {
 public:
  // Marks the start of the measured run (the first Next() call).
  void Start(absl::Time now) { start_ = last_delivery_ = now; }
  // One delivered batch: how long Next() waited, when it returned.
  void AddBatch(absl::Time delivered, absl::Duration waited, int64_t images, int64_t bytes,
                absl::Duration receive_latency, const std::string& server);
  // The servers' worker seconds for the last batch added.
  void AddServerWork(double worker_seconds) { worker_seconds_ += worker_seconds; }
  // Closes the run at `end` (after the last training step).
  RunSummary Finish(absl::Time end) const;

 private:
  absl::Time start_, last_delivery_;
  absl::Duration waited_;
  double worker_seconds_ = 0;
  int64_t batches_ = 0, images_ = 0, bytes_ = 0;
  std::vector<double> inter_batch_ms_, receive_ms_;
  std::map<std::string, int64_t> per_server_;
};

// The q-quantile (0..1) by nearest rank; 0 for no values.
double Percentile(std::vector<double> values, double q);

}  // namespace stoker

#endif  // STOKER_CLIENT_RUN_STATS_H_
