#include "client/run_stats.h"

#include <algorithm>
#include <cmath>

namespace stoker {

void RunStats::AddBatch(absl::Time delivered, absl::Duration waited, int64_t images, int64_t bytes,
                        absl::Duration receive_latency, const std::string& server) {
  inter_batch_ms_.push_back(absl::ToDoubleMilliseconds(delivered - last_delivery_));
  receive_ms_.push_back(absl::ToDoubleMilliseconds(receive_latency));
  last_delivery_ = delivered;
  waited_ += waited;
  ++batches_;
  images_ += images;
  bytes_ += bytes;
  ++per_server_[server];
}

RunSummary RunStats::Finish(absl::Time end) const {
  RunSummary s;
  s.batches = batches_;
  s.images = images_;
  s.bytes = bytes_;
  s.seconds = absl::ToDoubleSeconds(end - start_);
  if (s.seconds > 0) {
    s.images_per_second = static_cast<double>(images_) / s.seconds;
    s.megabytes_per_second = static_cast<double>(bytes_) / 1e6 / s.seconds;
    s.starved_percent = 100.0 * absl::ToDoubleSeconds(waited_) / s.seconds;
  }
  s.inter_batch_p50_ms = Percentile(inter_batch_ms_, 0.50);
  s.inter_batch_p90_ms = Percentile(inter_batch_ms_, 0.90);
  s.inter_batch_p99_ms = Percentile(inter_batch_ms_, 0.99);
  s.inter_batch_max_ms = Percentile(inter_batch_ms_, 1.0);
  s.receive_latency_p50_ms = Percentile(receive_ms_, 0.50);
  s.server_worker_seconds = worker_seconds_;
  if (worker_seconds_ > 0) s.server_images_per_worker_second = static_cast<double>(images_) / worker_seconds_;
  s.batches_per_server = per_server_;
  return s;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(values.size()))) - 1;
  return values[i];
}

}  // namespace stoker
