// The client's Prometheus metrics. Created once per process; handles are
// safe to update from any thread; the registry owns them.
#ifndef STOKER_CLIENT_CLIENT_METRICS_H_
#define STOKER_CLIENT_CLIENT_METRICS_H_

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace stoker {

struct ClientMetrics {
  explicit ClientMetrics(prometheus::Registry& registry);

  prometheus::Histogram* wait_seconds;             // stoker_client_wait_seconds
  prometheus::Histogram* receive_latency_seconds;  // stoker_client_receive_latency_seconds
  prometheus::Counter* received_bytes;             // stoker_client_received_bytes_total
  prometheus::Counter* batches;                    // stoker_client_batches_total
  prometheus::Counter* failed_samples;             // stoker_client_failed_samples_total
  prometheus::Gauge* buffered_batches;             // stoker_client_buffered_batches
  prometheus::Gauge* inflight_batches;             // stoker_client_inflight_batches
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CLIENT_METRICS_H_
