// The data server's Prometheus metrics. Handles are created once at start-up
// and are safe to update from any thread; the registry owns them.
#ifndef STOKER_DATAPLANE_SERVER_METRICS_H_
#define STOKER_DATAPLANE_SERVER_METRICS_H_

#include <map>
#include <memory>
#include <string>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "dataplane/capacity_meter.h"

namespace stoker {

struct ServerMetrics {
  explicit ServerMetrics(prometheus::Registry& registry);

  // stoker_server_sample_stage_seconds{stage}: per-sample worker time.
  prometheus::Histogram* read_seconds;
  prometheus::Histogram* decode_seconds;
  prometheus::Histogram* augment_seconds;
  // stoker_server_batch_stage_seconds{stage}: per-batch times.
  prometheus::Histogram* queue_seconds;     // request arrival to first sample start
  prometheus::Histogram* assemble_seconds;  // laying samples into the buffer
  prometheus::Histogram* send_seconds;      // batch ready to last chunk written
  prometheus::Counter* samples;             // stoker_server_samples_total
  // stoker_server_samples_failed_total{reason}: reason is a DecodeFailure
  // name or "read_error".
  prometheus::Counter& SamplesFailed(const std::string& reason);
  // stoker_server_batches_total{cache_mode}: none, batch, decoded, raw (so
  // that dashboards are not misread while stoker-diagnose runs).
  prometheus::Counter& Batches(int cache_mode);
  prometheus::Counter* sent_bytes;          // stoker_server_sent_bytes_total
  prometheus::Counter* read_bytes;          // stoker_server_read_bytes_total
  prometheus::Gauge* inflight_batches;      // stoker_server_inflight_batches
  prometheus::Gauge* queued_samples;        // stoker_server_queued_samples
  prometheus::Gauge* streams;               // stoker_server_streams
  prometheus::Gauge* workers;               // stoker_server_workers
  prometheus::Counter* rejected_sessions;   // stoker_server_rejected_sessions_total
  // stoker_server_capacity_images_per_second (see capacity_meter.h).
  std::unique_ptr<CapacityMeter> capacity;

 private:
  std::map<std::string, prometheus::Counter*> samples_failed_;  // constant after construction
  std::map<int, prometheus::Counter*> batches_;                   // constant after construction
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SERVER_METRICS_H_
