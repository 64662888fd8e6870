// The client's Prometheus metrics. Created once per process; handles are
// safe to update from any thread; the registry owns them.
#ifndef STOKER_CLIENT_CLIENT_METRICS_H_
#define STOKER_CLIENT_CLIENT_METRICS_H_

#include <string>

#include "prometheus/counter.h"
#include "prometheus/family.h"
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
  // Bounded fan-out (fanout.h): servers this rank streams from, and the
  // prefetch depth (most batches requested or buffered at once) and its bytes.
  prometheus::Gauge* servers_in_use;        // stoker_client_servers_in_use
  prometheus::Gauge* prefetch_batches;      // stoker_client_prefetch_batches
  prometheus::Gauge* prefetch_bytes;        // stoker_client_prefetch_bytes
  prometheus::Counter* reassigned_batches;  // stoker_client_reassigned_batches_total
  // stoker_client_shard_affinity_batches_total{result="hit"|"miss"}: batches
  // of the shard-aware order made by their lane's server, or by another.
  prometheus::Counter* affinity_hits;
  prometheus::Counter* affinity_misses;
  prometheus::Counter* streams_opened;  // stoker_client_streams_opened_total
  prometheus::Histogram* h2d_seconds;   // stoker_client_h2d_seconds
  // Sums over received batches of their header's times (see bottleneck.h):
  prometheus::Counter* batch_server_seconds;    // stoker_client_batch_server_seconds_total
  prometheus::Counter* batch_transfer_seconds;  // stoker_client_batch_transfer_seconds_total
  prometheus::Counter* batch_read_seconds;      // stoker_client_batch_read_seconds_total
  prometheus::Counter* batch_compute_seconds;   // stoker_client_batch_compute_seconds_total
  prometheus::Counter* batch_python_seconds;    // stoker_client_batch_python_seconds_total
  // Seconds spent waiting for servers (or the local producer) that were
  // copying the dataset from a remote store into their cache.
  prometheus::Counter* storage_wait_seconds;  // stoker_client_storage_wait_seconds_total
  prometheus::Gauge* starved_ratio;           // stoker_client_starved_ratio
  // The job's demand (demand_meter.h): images handed to the training loop
  // after a measured step, the steps' seconds, and their recent ratio.
  prometheus::Counter* consumed_images;         // stoker_client_consumed_images_total
  prometheus::Counter* step_seconds;            // stoker_client_step_seconds_total
  prometheus::Gauge* demand_images_per_second;  // stoker_client_demand_images_per_second
  // stoker_client_bottleneck{stage}: 1 for the current verdict, 0 otherwise
  prometheus::Gauge& Bottleneck(const std::string& stage) { return bottleneck_->Add({{"stage", stage}}); }
  prometheus::Counter* h2d_bytes;  // stoker_client_h2d_bytes_total

  // stoker_client_ring_slots{state="in_use"|"free"}
  prometheus::Gauge& RingSlots(const std::string& state) { return ring_slots_->Add({{"state", state}}); }
  // stoker_client_device_path{path="cuda"|"cpu"}: 1 for the active path
  prometheus::Gauge& DevicePath(const std::string& path) { return device_path_->Add({{"path", path}}); }

  // stoker_client_server_batches_total{server}, ..._server_failures_total{server}
  prometheus::Counter& ServerBatches(const std::string& server) { return server_batches_->Add({{"server", server}}); }
  prometheus::Counter& ServerFailures(const std::string& server) { return server_failures_->Add({{"server", server}}); }
  // stoker_client_session_refusals_total{server}
  prometheus::Counter& SessionRefusals(const std::string& server) {
    return session_refusals_->Add({{"server", server}});
  }
  // stoker_client_server_full_total{server}
  prometheus::Counter& ServerFull(const std::string& server) { return server_full_->Add({{"server", server}}); }

 private:
  prometheus::Family<prometheus::Counter>* server_batches_;
  prometheus::Family<prometheus::Counter>* server_failures_;
  prometheus::Family<prometheus::Counter>* session_refusals_;
  prometheus::Family<prometheus::Counter>* server_full_;
  prometheus::Family<prometheus::Gauge>* ring_slots_;
  prometheus::Family<prometheus::Gauge>* device_path_;
  prometheus::Family<prometheus::Gauge>* bottleneck_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CLIENT_METRICS_H_
