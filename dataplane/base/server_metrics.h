// The data server's Prometheus metrics. Handles are created once at start-up
// and are safe to update from any thread; the registry owns them.
#ifndef STOKER_DATAPLANE_BASE_SERVER_METRICS_H_
#define STOKER_DATAPLANE_BASE_SERVER_METRICS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dataplane/base/capacity_meter.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace stoker {

struct ServerMetrics {
  // `max_job_labels`: job names that get their own label on the per-job
  // metrics; later ones are counted as "other" (bounded cardinality).
  explicit ServerMetrics(prometheus::Registry& registry, int max_job_labels = 16);

  // stoker_server_sample_stage_seconds{stage}: per-sample worker time.
  prometheus::Histogram* read_seconds;
  prometheus::Histogram* decode_seconds;
  prometheus::Histogram* augment_seconds;
  prometheus::Histogram* python_seconds;  // stage="python": the session's python(...) ops
  // stoker_server_python_workers_replaced_total{reason}: timeout, crash,
  // protocol; and stoker_server_python_workers.
  prometheus::Counter& PythonReplaced(const std::string& reason) { return *python_replaced_.at(reason); }
  prometheus::Gauge* python_workers;
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
  prometheus::Counter* sent_bytes;         // stoker_server_sent_bytes_total
  prometheus::Counter* read_bytes;         // stoker_server_read_bytes_total
  prometheus::Gauge* inflight_batches;     // stoker_server_inflight_batches
  prometheus::Gauge* queued_samples;       // stoker_server_queued_samples
  prometheus::Gauge* streams;              // stoker_server_streams
  prometheus::Gauge* workers;              // stoker_server_workers
  prometheus::Counter* rejected_sessions;  // stoker_server_rejected_sessions_total
  // stoker_server_capacity_images_per_second (see capacity_meter.h).
  std::unique_ptr<CapacityMeter> capacity;
  // stoker_server_job_worker_seconds_total{job} and
  // stoker_server_job_samples_total{job}: the fair share's measure.
  prometheus::Counter& JobWorkerSeconds(const std::string& job);
  prometheus::Counter& JobSamples(const std::string& job);
  // stoker_server_batch_cache_lookups_total{result}: hit, joined (waited for
  // a batch another session was making), miss; evicted.
  prometheus::Counter& BatchCache(const std::string& result);
  prometheus::Gauge* batch_cache_bytes;  // stoker_server_batch_cache_bytes
  prometheus::Counter* full_refusals;    // stoker_server_full_refusals_total

 private:
  // The label a job's metrics carry: its name while fewer than
  // max_job_labels_ names are in use, else "other".
  std::string JobLabel(const std::string& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(jobs_mu_);
  std::pair<prometheus::Counter*, prometheus::Counter*> JobCounters(const std::string& job);
  const int max_job_labels_;
  prometheus::Family<prometheus::Counter>* job_seconds_family_;
  prometheus::Family<prometheus::Counter>* job_samples_family_;
  absl::Mutex jobs_mu_;
  std::map<std::string, std::pair<prometheus::Counter*, prometheus::Counter*>> jobs_ ABSL_GUARDED_BY(jobs_mu_);
  std::map<std::string, prometheus::Counter*> cache_;  // constant after construction

  std::map<std::string, prometheus::Counter*> samples_failed_;   // constant after construction
  std::map<int, prometheus::Counter*> batches_;                  // constant after construction
  std::map<std::string, prometheus::Counter*> python_replaced_;  // constant after construction
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_BASE_SERVER_METRICS_H_
