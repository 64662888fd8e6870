#include "dataplane/server_metrics.h"

#include "common/metrics_endpoint.h"

namespace stoker {

ServerMetrics::ServerMetrics(prometheus::Registry& registry) {
  auto& sample_stage = prometheus::BuildHistogram()
                           .Name("stoker_server_sample_stage_seconds")
                           .Help("Worker time spent on one sample, by stage (read, decode, augment).")
                           .Register(registry);
  read_seconds = &sample_stage.Add({{"stage", "read"}}, DurationBuckets());
  decode_seconds = &sample_stage.Add({{"stage", "decode"}}, DurationBuckets());
  augment_seconds = &sample_stage.Add({{"stage", "augment"}}, DurationBuckets());
  auto& batch_stage = prometheus::BuildHistogram()
                          .Name("stoker_server_batch_stage_seconds")
                          .Help("Time one batch spent in a stage: queue (waiting for a worker), "
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
                     .Help("Samples that could not be read or decoded, by reason.")
                     .Register(registry);
  for (const char* reason : {"read_error", "empty", "not_an_image", "truncated", "corrupt", "too_large"}) {
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
  streams = &prometheus::BuildGauge()
                 .Name("stoker_server_streams")
                 .Help("Open batch streams.")
                 .Register(registry)
                 .Add({});
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
}

prometheus::Counter& ServerMetrics::Batches(int cache_mode) {
  auto it = batches_.find(cache_mode);
  return it != batches_.end() ? *it->second : *batches_.at(0);
}

prometheus::Counter& ServerMetrics::SamplesFailed(const std::string& reason) {
  auto it = samples_failed_.find(reason);
  return it != samples_failed_.end() ? *it->second : *samples_failed_.at("corrupt");
}

}  // namespace stoker
