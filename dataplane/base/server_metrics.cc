#include "dataplane/base/server_metrics.h"

#include <algorithm>

#include "common/metrics_endpoint.h"

namespace stoker {

ServerMetrics::ServerMetrics(prometheus::Registry& registry, int max_job_labels)
    : max_job_labels_(std::max(0, max_job_labels)) {
  auto& sample_stage = prometheus::BuildHistogram()
                           .Name("stoker_server_sample_stage_seconds")
                           .Help("Worker time spent on one sample, by stage (read, decode, augment, python).")
                           .Register(registry);
  read_seconds = &sample_stage.Add({{"stage", "read"}}, DurationBuckets());
  decode_seconds = &sample_stage.Add({{"stage", "decode"}}, DurationBuckets());
  augment_seconds = &sample_stage.Add({{"stage", "augment"}}, DurationBuckets());
  python_seconds = &sample_stage.Add({{"stage", "python"}}, DurationBuckets());
  auto& replaced = prometheus::BuildCounter()
                       .Name("stoker_server_python_workers_replaced_total")
                       .Help(
                           "Python transform worker processes killed or lost and started anew, by reason: timeout "
                           "(--python-transform-timeout-ms), crash (the process died), protocol (a reply that "
                           "could not be read), stopped (its sample's stream ended while the function ran).")
                       .Register(registry);
  for (const char* reason : {"timeout", "crash", "protocol", "stopped"}) {
    python_replaced_[reason] = &replaced.Add({{"reason", reason}});
  }
  python_workers = &prometheus::BuildGauge()
                        .Name("stoker_server_python_workers")
                        .Help("Python transform worker processes running (--python-workers).")
                        .Register(registry)
                        .Add({});
  auto& batch_stage = prometheus::BuildHistogram()
                          .Name("stoker_server_batch_stage_seconds")
                          .Help(
                              "Time one batch spent in a stage: queue (waiting for a worker), "
                              "assemble (laying samples out), send (ready to fully written).")
                          .Register(registry);
  queue_seconds = &batch_stage.Add({{"stage", "queue"}}, DurationBuckets());
  assemble_seconds = &batch_stage.Add({{"stage", "assemble"}}, DurationBuckets());
  send_seconds = &batch_stage.Add({{"stage", "send"}}, DurationBuckets());
  samples = &prometheus::BuildCounter()
                 .Name("stoker_server_samples_total")
                 .Help("Samples produced (including failed ones, sent as zeros).")
                 .Register(registry)
                 .Add({});
  auto& failed = prometheus::BuildCounter()
                     .Name("stoker_server_samples_failed_total")
                     .Help("Samples that could not be read or decoded (or lacked a requested field), by reason.")
                     .Register(registry);
  for (const char* reason : {"read_error", "empty", "not_an_image", "truncated", "corrupt", "too_large",
                             "missing_field", "bad_field", "transform", "unsupported"}) {
    samples_failed_[reason] = &failed.Add({{"reason", reason}});
  }
  auto& batches = prometheus::BuildCounter()
                      .Name("stoker_server_batches_total")
                      .Help("Batches fully sent, by the session's cache mode.")
                      .Register(registry);
  const char* modes[] = {"none", "batch", "decoded", "raw"};  // CacheMode values 0..3
  for (int m = 0; m < 4; ++m) batches_[m] = &batches.Add({{"cache_mode", modes[m]}});
  sent_bytes = &prometheus::BuildCounter()
                    .Name("stoker_server_sent_bytes_total")
                    .Help("Image bytes written to batch streams.")
                    .Register(registry)
                    .Add({});
  read_bytes = &prometheus::BuildCounter()
                    .Name("stoker_server_read_bytes_total")
                    .Help("Encoded bytes read from storage.")
                    .Register(registry)
                    .Add({});
  inflight_batches = &prometheus::BuildGauge()
                          .Name("stoker_server_inflight_batches")
                          .Help("Batches requested and not yet fully sent.")
                          .Register(registry)
                          .Add({});
  queued_samples = &prometheus::BuildGauge()
                        .Name("stoker_server_queued_samples")
                        .Help("Samples waiting for a worker thread.")
                        .Register(registry)
                        .Add({});
  streams =
      &prometheus::BuildGauge().Name("stoker_server_streams").Help("Open batch streams.").Register(registry).Add({});
  workers = &prometheus::BuildGauge()
                 .Name("stoker_server_workers")
                 .Help("Worker threads that decode and augment.")
                 .Register(registry)
                 .Add({});
  rejected_sessions = &prometheus::BuildCounter()
                           .Name("stoker_server_rejected_sessions_total")
                           .Help("Sessions refused for a bad config (dataset, pipeline, batch size).")
                           .Register(registry)
                           .Add({});
  capacity = std::make_unique<CapacityMeter>(
      &prometheus::BuildGauge()
           .Name("stoker_server_capacity_images_per_second")
           .Help("Images per second this server's workers can make for the pipelines they ran recently: workers / "
                 "worker-seconds per sample (20 s half-life). The recording rule stoker:servers_needed divides "
                 "training jobs' demand by it.")
           .Register(registry)
           .Add({}));
  job_seconds_family_ = &prometheus::BuildCounter()
                             .Name("stoker_server_job_worker_seconds_total")
                             .Help(
                                 "Worker seconds spent on each training job's samples (SessionConfig.job; names "
                                 "past --max-job-labels are counted as \"other\"). Jobs share workers by weight.")
                             .Register(registry);
  job_samples_family_ = &prometheus::BuildCounter()
                             .Name("stoker_server_job_samples_total")
                             .Help("Samples made for each training job (labelled as the worker seconds).")
                             .Register(registry);
  auto& cache = prometheus::BuildCounter()
                    .Name("stoker_server_batch_cache_lookups_total")
                    .Help(
                        "Batch cache (--batch-cache-bytes) lookups by result: hit (a kept batch), joined (waited "
                        "for a batch another session was making), miss (made here); and evicted batches.")
                    .Register(registry);
  for (const char* result : {"hit", "joined", "miss", "evicted"}) cache_[result] = &cache.Add({{"result", result}});
  batch_cache_bytes = &prometheus::BuildGauge()
                           .Name("stoker_server_batch_cache_bytes")
                           .Help("Bytes of finished batches kept in the batch cache.")
                           .Register(registry)
                           .Add({});
  full_refusals = &prometheus::BuildCounter()
                       .Name("stoker_server_full_refusals_total")
                       .Help("Streams refused because the server was full (--max-sessions, --max-streams).")
                       .Register(registry)
                       .Add({});
}

std::string ServerMetrics::JobLabel(const std::string& job) {
  const std::string name = job.empty() ? "unnamed" : job;
  if (jobs_.count(name) || static_cast<int>(jobs_.size()) < max_job_labels_) return name;
  return "other";
}

std::pair<prometheus::Counter*, prometheus::Counter*> ServerMetrics::JobCounters(const std::string& job) {
  absl::MutexLock lock(&jobs_mu_);
  const std::string label = JobLabel(job);
  auto [it, added] = jobs_.try_emplace(label);
  if (added) {
    it->second = {&job_seconds_family_->Add({{"job", label}}), &job_samples_family_->Add({{"job", label}})};
  }
  return it->second;
}

prometheus::Counter& ServerMetrics::JobWorkerSeconds(const std::string& job) { return *JobCounters(job).first; }

prometheus::Counter& ServerMetrics::JobSamples(const std::string& job) { return *JobCounters(job).second; }

prometheus::Counter& ServerMetrics::BatchCache(const std::string& result) { return *cache_.at(result); }

prometheus::Counter& ServerMetrics::Batches(int cache_mode) {
  auto it = batches_.find(cache_mode);
  return it != batches_.end() ? *it->second : *batches_.at(0);
}

prometheus::Counter& ServerMetrics::SamplesFailed(const std::string& reason) {
  auto it = samples_failed_.find(reason);
  return it != samples_failed_.end() ? *it->second : *samples_failed_.at("corrupt");
}

}  // namespace stoker
