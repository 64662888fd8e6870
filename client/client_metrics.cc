#include "client/client_metrics.h"

#include "common/metrics_endpoint.h"

namespace stoker {

ClientMetrics::ClientMetrics(prometheus::Registry& registry) {
  wait_seconds = &prometheus::BuildHistogram()
                      .Name("stoker_client_wait_seconds")
                      .Help("Time the training loop waited in Next() for a batch.")
                      .Register(registry)
                      .Add({}, DurationBuckets());
  receive_latency_seconds = &prometheus::BuildHistogram()
                                 .Name("stoker_client_receive_latency_seconds")
                                 .Help("Time from requesting a batch to holding all of it.")
                                 .Register(registry)
                                 .Add({}, DurationBuckets());
  received_bytes = &prometheus::BuildCounter()
                        .Name("stoker_client_received_bytes_total")
                        .Help("Image bytes received from data servers.")
                        .Register(registry)
                        .Add({});
  batches = &prometheus::BuildCounter()
                 .Name("stoker_client_batches_total")
                 .Help("Batches received from data servers.")
                 .Register(registry)
                 .Add({});
  failed_samples = &prometheus::BuildCounter()
                        .Name("stoker_client_failed_samples_total")
                        .Help("Samples the servers could not produce (delivered as zeros).")
                        .Register(registry)
                        .Add({});
  buffered_batches = &prometheus::BuildGauge()
                          .Name("stoker_client_buffered_batches")
                          .Help("Batches received and waiting for the training loop.")
                          .Register(registry)
                          .Add({});
  inflight_batches = &prometheus::BuildGauge()
                          .Name("stoker_client_inflight_batches")
                          .Help("Batches requested from servers and not yet received.")
                          .Register(registry)
                          .Add({});
  servers_in_use = &prometheus::BuildGauge()
                        .Name("stoker_client_servers_in_use")
                        .Help("Data servers this client streams from now (its subset of the pool).")
                        .Register(registry)
                        .Add({});
  prefetch_batches = &prometheus::BuildGauge()
                          .Name("stoker_client_prefetch_batches")
                          .Help("Most batches this client keeps requested or buffered at once (its prefetch depth).")
                          .Register(registry)
                          .Add({});
  prefetch_bytes = &prometheus::BuildGauge()
                        .Name("stoker_client_prefetch_bytes")
                        .Help("Bytes the prefetch depth holds at most: depth x batch bytes (0 when batches vary).")
                        .Register(registry)
                        .Add({});
  streams_opened = &prometheus::BuildCounter()
                        .Name("stoker_client_streams_opened_total")
                        .Help(
                            "Batch streams opened to data servers (one per server, kept across epochs; more "
                            "after failures or restarts).")
                        .Register(registry)
                        .Add({});
  reassigned_batches = &prometheus::BuildCounter()
                            .Name("stoker_client_reassigned_batches_total")
                            .Help("Batches requested again from another server after theirs failed.")
                            .Register(registry)
                            .Add({});
  auto& affinity = prometheus::BuildCounter()
                       .Name("stoker_client_shard_affinity_batches_total")
                       .Help(
                           "Batch requests of the shard-aware order (shuffle=shards) sent to the server that "
                           "reads their shards (result=hit) or, that one being busy or gone, to another "
                           "(result=miss: that server reads those shards too); a batch asked again after a "
                           "failure counts again.")
                       .Register(registry);
  affinity_hits = &affinity.Add({{"result", "hit"}});
  affinity_misses = &affinity.Add({{"result", "miss"}});
  h2d_seconds = &prometheus::BuildHistogram()
                     .Name("stoker_client_h2d_seconds")
                     .Help("Host-to-device copy and conversion time per batch (CPU fallback: the conversion).")
                     .Register(registry)
                     .Add({}, DurationBuckets());
  h2d_bytes = &prometheus::BuildCounter()
                   .Name("stoker_client_h2d_bytes_total")
                   .Help("Batch bytes copied from host to device (CPU fallback: converted).")
                   .Register(registry)
                   .Add({});
  ring_slots_ = &prometheus::BuildGauge()
                     .Name("stoker_client_ring_slots")
                     .Help("Device tensor slots held by the consumer (in_use) or free.")
                     .Register(registry);
  device_path_ = &prometheus::BuildGauge()
                      .Name("stoker_client_device_path")
                      .Help("1 for the path staging batches to the device: cuda or the cpu fallback.")
                      .Register(registry);
  auto counter = [&registry](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
  };
  batch_server_seconds = counter("stoker_client_batch_server_seconds_total",
                                 "Sum over received batches of server time (request arrival to ready).");
  batch_transfer_seconds = counter("stoker_client_batch_transfer_seconds_total",
                                   "Sum over received batches of receive latency minus server time.");
  batch_read_seconds = counter("stoker_client_batch_read_seconds_total",
                               "Sum over received batches of worker time spent reading samples.");
  batch_compute_seconds = counter("stoker_client_batch_compute_seconds_total",
                                  "Sum over received batches of worker time spent decoding and augmenting (Python "
                                  "transform stages included).");
  batch_python_seconds = counter("stoker_client_batch_python_seconds_total",
                                 "Sum over received batches of worker time spent in Python transform stages (part of "
                                 "the compute time).");
  storage_wait_seconds = counter("stoker_client_storage_wait_seconds_total",
                                 "Seconds spent waiting to open the dataset while the servers (or the local producer) "
                                 "copied it from its remote store into their cache (the verdict's storage wait).");
  starved_ratio = &prometheus::BuildGauge()
                       .Name("stoker_client_starved_ratio")
                       .Help("Share of the last window the training loop waited for data.")
                       .Register(registry)
                       .Add({});
  consumed_images = counter("stoker_client_consumed_images_total",
                            "Images handed to the training loop after a measured step (the demand's numerator).");
  step_seconds = counter("stoker_client_step_seconds_total",
                         "Seconds the training loop spent outside Next() between batches: its step, the time it "
                         "does not wait for data (the demand's denominator).");
  demand_images_per_second = &prometheus::BuildGauge()
                                  .Name("stoker_client_demand_images_per_second")
                                  .Help(
                                      "Images per second the training loop would consume if it never waited "
                                      "(recent steps, 20 s half-life).")
                                  .Register(registry)
                                  .Add({});
  bottleneck_ =
      &prometheus::BuildGauge()
           .Name("stoker_client_bottleneck")
           .Help(
               "1 for the stage that limits input now (none, server_cpu, python_transform, storage, network, h2d, "
               "host_convert).")
           .Register(registry);
  server_batches_ = &prometheus::BuildCounter()
                         .Name("stoker_client_server_batches_total")
                         .Help("Batches received, by data server.")
                         .Register(registry);
  server_failures_ = &prometheus::BuildCounter()
                          .Name("stoker_client_server_failures_total")
                          .Help("Streams to a data server that failed (error, reset, timeout), by server.")
                          .Register(registry);
  session_refusals_ = &prometheus::BuildCounter()
                           .Name("stoker_client_session_refusals_total")
                           .Help(
                               "Streams whose server refused the session (e.g. another copy of the dataset: "
                               "a different fingerprint), by server; such a server gets no work.")
                           .Register(registry);
  server_full_ = &prometheus::BuildCounter()
                      .Name("stoker_client_server_full_total")
                      .Help(
                          "Streams a full data server (its --max-sessions or --max-streams) turned away, by "
                          "server; it is asked again after its retry hint, and the others get the work.")
                      .Register(registry);
}

}  // namespace stoker
