// stoker-bench: drives a training loop with a simulated step against Stoker
// data servers and reports throughput, the share of time the loop starved for
// data, and the time between batches.
#include <sys/resource.h>
#include <xxhash.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/batch_timeline.h"
#include "client/device/device_stager.h"
#include "client/run_stats.h"
#include "client/security_flags.h"
#include "client/stoker_client.h"
#include "common/field_spec.h"
#include "common/flag_names.h"
#include "common/log_level.h"
#include "common/malloc_tuning.h"
#include "common/metrics_endpoint.h"
#include "dataplane/ops/pipeline_text.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, servers, "",
          "Data servers: host:port,host:port,... or dns:///name:port (re-resolved every --resolve-interval-seconds)");
ABSL_FLAG(int, local_workers, 0,
          "Threads in this process that read, decode and augment too (local mode; 0: off). With no --servers, "
          "stoker-bench is a single-machine loader");
ABSL_FLAG(std::string, data_root, ".",
          "Where --local-workers find --dataset (as a server's --data-root: a directory, s3://, http(s):// or "
          "catalog:FILE, copied into STOKER_CACHE_DIR)");
ABSL_FLAG(int, test_local_delay_ms, 0, "Test only: extra milliseconds of local worker time per sample");
ABSL_FLAG(std::string, job, "",
          "Training job name the servers share workers by and label per-job metrics with (default host:pid)");
ABSL_FLAG(double, weight, 1, "The job's weight in the servers' fair sharing of worker time (up to --max-job-weight)");
ABSL_FLAG(double, resolve_interval_seconds, 5, "Seconds between DNS re-resolutions of a dns:/// server name");
ABSL_FLAG(int, rank, 0, "This process's rank (its share of each epoch, as PyTorch's DistributedSampler)");
ABSL_FLAG(int, world_size, 1, "Number of ranks sharing each epoch");
ABSL_FLAG(bool, unordered, false, "Hand batches over as they complete instead of in epoch order");
ABSL_FLAG(double, unavailable_timeout_seconds, 30, "Fail once no data server has answered for this many seconds");
ABSL_FLAG(double, batch_timeout_seconds, 120, "Give a server up when one batch takes longer than this (seconds)");
ABSL_FLAG(std::string, device, "auto",
          "Where batches go: auto (CUDA if usable, else the CPU fallback), cuda (an error without a GPU), cpu, or "
          "none (keep uint8 host batches; measures the data path alone)");
ABSL_FLAG(std::string, out_dtype, "float32",
          "Tensor type made on the device: float32, float16, bfloat16, or uint8 (pixels as received)");
ABSL_FLAG(bool, normalize, true, "Normalize on the device with ImageNet's mean and std");
ABSL_FLAG(int, test_h2d_delay_ms, 0, "Test only: extra milliseconds per batch on the CPU device path (a slow copy)");
ABSL_FLAG(std::string, resume, "", "Continue from a position file written by --save-position");
ABSL_FLAG(std::string, save_position, "", "Write the client's position (a ClientPosition proto) here at exit");
ABSL_FLAG(int, stop_after_batches, 0, "Exit after delivering this many batches in all (0: run to the end)");
ABSL_FLAG(std::string, dataset, "", "Dataset name under each server's --data-root");
ABSL_FLAG(int, batch_size, 256, "Samples per batch");
ABSL_FLAG(int, epochs, 1, "Epochs to run");
ABSL_FLAG(int, max_batches, 0, "Stop each epoch after this many batches; 0 runs whole epochs");
ABSL_FLAG(double, step_ms, 0, "Simulated training step per batch, in milliseconds");
ABSL_FLAG(std::string, pipeline, "",
          "Ops, e.g. 'resize(256), center_crop(224)'; empty means RandomResizedCrop(224) + "
          "RandomHorizontalFlip(0.5)");
ABSL_FLAG(std::string, fields, "",
          "Sample fields beside the image, e.g. 'image=jpg;png, caption=txt, meta=json, label=cls' (docs/concepts/"
          "fields.md); per-field bytes are printed. Empty: (images, labels) batches");
ABSL_FLAG(int64_t, max_field_bytes, 0,
          "Largest text/bytes/json field value per sample, in bytes; larger ones fail the sample as too_large; "
          "0: 1 MiB (at most the servers' --max-field-bytes)");
ABSL_FLAG(std::string, annotations, "",
          "A COCO instances JSON under the servers' --data-root whose images are --dataset (for fields boxes, "
          "labels, masks, keypoints)");
ABSL_FLAG(double, box_min_visibility, 0,
          "Drop a box with less than this fraction (0..1) of its area left after a crop; 0: only empty boxes");
ABSL_FLAG(std::string, tokenizer, "",
          "A SentencePiece model file under the servers' --data-root that tokenises fields of kind tokens");
ABSL_FLAG(int, max_tokens, 0, "Most token ids kept per sample (0: all)");
ABSL_FLAG(std::string, layout, "nhwc", "Image layout: nhwc or nchw");
ABSL_FLAG(std::string, dtype, "uint8", "Pixel type: uint8, float16 or float32 (value / 255, or normalize's output)");
ABSL_FLAG(std::string, bad_sample_policy, "skip",
          "skip: an undecodable sample is replaced by the next decodable one; fail: the epoch stops with DATA_LOSS");
ABSL_FLAG(std::string, cache_mode, "none",
          "none, or batch: servers re-send their first batch (measures the transport alone)");
ABSL_FLAG(uint64_t, seed, 0, "Session seed: fixes sample order and augmentation");
ABSL_FLAG(std::string, shuffle, "global",
          "Epoch order: global (one shuffle of every sample) or shards (shards shuffled, samples shuffled within a "
          "window of --shard-window shards, each window's batches sent to one server: fewer store reads, less "
          "mixing; see docs/how-to/object-storage.md)");
ABSL_FLAG(int, shard_window, 0, "Shards shuffled together with --shuffle=shards (0: 4)");
ABSL_FLAG(int, window, 2, "Batches requested from one server at a time");
ABSL_FLAG(int, streams_per_server, 2,
          "Streams to each server, each on its own TCP connection, sharing its --window (see docs/transport.md)");
ABSL_FLAG(int, prefetch, 0,
          "Most batches requested or buffered at once; 0: by time (enough to cover a batch's arrival time, and 2 s "
          "of a server failing over, at the step's rate; at most --prefetch-bytes)");
ABSL_FLAG(int64_t, prefetch_bytes, int64_t{2} << 30, "Cap of the prefetch depth by time, in bytes; 0: none");
ABSL_FLAG(bool, bounded_fanout, true,
          "Stream from a subset of the servers sized from demand (--min-servers..--max-servers); false: from every "
          "server");
ABSL_FLAG(int, min_servers, 2, "Bounded fan-out: fewest servers streamed from (failover), where the pool has them");
ABSL_FLAG(int, initial_servers, 2,
          "Bounded fan-out: servers streamed from before a demand is measured (more follow as demand and supply ask)");
ABSL_FLAG(int, max_servers, 32, "Bounded fan-out: most servers streamed from; 0: the whole pool");
ABSL_FLAG(int, warmup_batches, 0, "Leave the first N delivered batches out of the summary (start-up, caches)");
ABSL_FLAG(bool, drop_last, false, "Leave out each epoch's last partial batch");
ABSL_FLAG(std::string, log_batches, "", "Write one JSON line per delivered batch to this file");
ABSL_FLAG(std::string, batch_times, "",
          "Write every batch's times (ms: inter-batch, wait, receive, h2d, server stages) to this file: JSON if "
          "it ends in .json, else CSV (tests/bench/plot_timeline.py draws it)");
ABSL_FLAG(bool, overlap_epochs, true,
          "Request the next epoch's first batches while the current one drains, on the same streams; false "
          "starts every epoch cold (for comparison)");
ABSL_FLAG(int, slowest, 5, "Print this many slowest batches (by inter-batch time) with their stage times");
ABSL_FLAG(std::string, json, "", "Write the summary as JSON to this file");
ABSL_FLAG(int, metrics_port, 0, "Prometheus /metrics HTTP port; 0 picks a free port, -1 disables");
ABSL_FLAG(std::string, metrics_host, "127.0.0.1",
          "Address the /metrics endpoint listens on: this host only by default; 0.0.0.0 (or a host's address) for "
          "a Prometheus elsewhere");
ABSL_FLAG(double, linger_seconds, 0, "Keep serving metrics this many seconds after the run");
ABSL_FLAG(double, connect_timeout_seconds, 10, "Seconds to wait for each server to answer OpenSession");
ABSL_FLAG(double, open_timeout_seconds, 1800,
          "Seconds to wait for servers that are up but still scanning the dataset (first open of a large tree)");

namespace stoker {
namespace {

std::string Hash(const HostBuffer& data) {
  const XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return absl::StrFormat("%016x%016x", h.high64, h.low64);
}

absl::StatusOr<ClientConfig> ConfigFromFlags() {
  ClientConfig c;
  c.servers = absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipWhitespace());
  c.security = stoker::SecurityFromFlags();
  c.session.set_job(absl::GetFlag(FLAGS_job));
  c.session.set_weight(absl::GetFlag(FLAGS_weight));
  c.local.workers = absl::GetFlag(FLAGS_local_workers);
  c.local.data_root = absl::GetFlag(FLAGS_data_root);
  c.local.sample_delay = absl::Milliseconds(absl::GetFlag(FLAGS_test_local_delay_ms));
  if (c.local.workers < 0) return absl::InvalidArgumentError("--local-workers must be >= 0");
  if (c.servers.empty() && c.local.workers == 0) {
    return absl::InvalidArgumentError(
        "give --servers (host:port,... or dns:///name:port), --local-workers N with --data-root DIR, or both");
  }
  if (absl::GetFlag(FLAGS_dataset).empty()) return absl::InvalidArgumentError("--dataset is required");
  c.session.set_dataset(absl::GetFlag(FLAGS_dataset));
  c.session.set_batch_size(absl::GetFlag(FLAGS_batch_size));
  c.session.set_seed(absl::GetFlag(FLAGS_seed));
  std::string text = absl::GetFlag(FLAGS_pipeline);
  if (text.empty()) text = std::string(kDefaultTrainPipeline);
  auto ops = ParsePipelineText(text);
  if (!ops.ok()) return ops.status();
  for (v1::Op& op : *ops) *c.session.add_pipeline() = std::move(op);
  const bool audio_sample = c.session.pipeline_size() > 0 && c.session.pipeline(0).has_audio();
  auto fields = ParseFieldsText(absl::GetFlag(FLAGS_fields), audio_sample);
  if (!fields.ok()) return absl::InvalidArgumentError(absl::StrCat("--fields: ", fields.status().message()));
  for (v1::FieldSpec& f : *fields) *c.session.add_fields() = std::move(f);
  c.session.set_max_field_bytes(absl::GetFlag(FLAGS_max_field_bytes));
  c.session.set_annotations(absl::GetFlag(FLAGS_annotations));
  c.session.set_box_min_visibility(static_cast<float>(absl::GetFlag(FLAGS_box_min_visibility)));
  c.session.set_tokenizer(absl::GetFlag(FLAGS_tokenizer));
  c.session.set_max_tokens(absl::GetFlag(FLAGS_max_tokens));
  const std::string layout = absl::GetFlag(FLAGS_layout);
  if (layout != "nhwc" && layout != "nchw") return absl::InvalidArgumentError("--layout must be nhwc or nchw");
  c.session.set_layout(layout == "nchw" ? v1::NCHW : v1::NHWC);
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "uint8") {
    c.session.set_dtype(v1::UINT8);
  } else if (dtype == "float16") {
    c.session.set_dtype(v1::FLOAT16);
  } else if (dtype == "float32") {
    c.session.set_dtype(v1::FLOAT32);
  } else {
    return absl::InvalidArgumentError("--dtype must be uint8, float16 or float32");
  }
  const std::string policy = absl::GetFlag(FLAGS_bad_sample_policy);
  if (policy != "skip" && policy != "fail")
    return absl::InvalidArgumentError("--bad-sample-policy must be skip or fail");
  c.session.set_bad_sample_policy(policy == "fail" ? v1::FAIL : v1::SKIP);
  const std::string cache = absl::GetFlag(FLAGS_cache_mode);
  if (cache != "none" && cache != "batch") return absl::InvalidArgumentError("--cache-mode must be none or batch");
  c.session.set_cache_mode(cache == "batch" ? v1::CACHE_BATCH : v1::CACHE_NONE);
  absl::StatusOr<v1::ShuffleOrder> shuffle = ParseShuffleOrder(absl::GetFlag(FLAGS_shuffle));
  if (!shuffle.ok()) return absl::InvalidArgumentError(absl::StrCat("--", shuffle.status().message()));
  c.session.set_shuffle(*shuffle);
  c.session.set_shard_window(absl::GetFlag(FLAGS_shard_window));
  c.window_per_server = absl::GetFlag(FLAGS_window);
  c.streams_per_server = absl::GetFlag(FLAGS_streams_per_server);
  if (c.streams_per_server < 1) return absl::InvalidArgumentError("--streams-per-server must be at least 1");
  c.prefetch_batches = absl::GetFlag(FLAGS_prefetch);
  c.prefetch_bytes = absl::GetFlag(FLAGS_prefetch_bytes);
  c.bounded_fanout = absl::GetFlag(FLAGS_bounded_fanout);
  c.min_servers = absl::GetFlag(FLAGS_min_servers);
  c.initial_servers = absl::GetFlag(FLAGS_initial_servers);
  c.max_servers = absl::GetFlag(FLAGS_max_servers);
  c.epochs = absl::GetFlag(FLAGS_epochs);
  c.overlap_epochs = absl::GetFlag(FLAGS_overlap_epochs);
  c.drop_last = absl::GetFlag(FLAGS_drop_last);
  c.rank = absl::GetFlag(FLAGS_rank);
  c.world_size = absl::GetFlag(FLAGS_world_size);
  c.ordered = !absl::GetFlag(FLAGS_unordered);
  c.resolve_interval = absl::Seconds(absl::GetFlag(FLAGS_resolve_interval_seconds));
  c.unavailable_timeout = absl::Seconds(absl::GetFlag(FLAGS_unavailable_timeout_seconds));
  c.batch_timeout = absl::Seconds(absl::GetFlag(FLAGS_batch_timeout_seconds));
  c.rpc_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_seconds));
  c.open_timeout = absl::Seconds(absl::GetFlag(FLAGS_open_timeout_seconds));
  return c;
}

void PrintSummary(const ClientConfig& c, const RunSummary& s) {
  std::printf("\nstoker-bench summary: %zu server(s)%s, batch %d, step %.1f ms\n", c.servers.size(),
              c.local.workers > 0 ? absl::StrCat(" + ", c.local.workers, " local worker(s)").c_str() : "",
              c.session.batch_size(), absl::GetFlag(FLAGS_step_ms));
  std::printf("  %-22s %12lld\n", "batches", static_cast<long long>(s.batches));
  std::printf("  %-22s %12lld\n", "images", static_cast<long long>(s.images));
  std::printf("  %-22s %12.2f\n", "wall seconds", s.seconds);
  std::printf("  %-22s %12.1f\n", "images/s", s.images_per_second);
  std::printf("  %-22s %12.1f\n", "MB/s", s.megabytes_per_second);
  std::printf("  %-22s %12.1f\n", "starved %", s.starved_percent);
  std::printf("  %-22s %12.2f\n", "inter-batch p50 ms", s.inter_batch_p50_ms);
  std::printf("  %-22s %12.2f\n", "inter-batch p90 ms", s.inter_batch_p90_ms);
  std::printf("  %-22s %12.2f\n", "inter-batch p99 ms", s.inter_batch_p99_ms);
  std::printf("  %-22s %12.2f\n", "inter-batch max ms", s.inter_batch_max_ms);
  std::printf("  %-22s %12.2f\n", "inter-batch p99/p50",
              s.inter_batch_p50_ms > 0 ? s.inter_batch_p99_ms / s.inter_batch_p50_ms : 0.0);
  std::printf("  %-22s %12.2f\n", "receive p50 ms", s.receive_latency_p50_ms);
  std::printf("  %-22s %12.1f\n", "images/worker-second", s.server_images_per_worker_second);
  for (const auto& [server, n] : s.batches_per_server) {
    std::printf("  %-22s %12lld\n", ("batches from " + server).c_str(), static_cast<long long>(n));
  }
  std::fflush(stdout);
}

nlohmann::json SummaryJson(const RunSummary& s) {
  return {{"batches", s.batches},
          {"images", s.images},
          {"bytes", s.bytes},
          {"seconds", s.seconds},
          {"images_per_second", s.images_per_second},
          {"megabytes_per_second", s.megabytes_per_second},
          {"starved_percent", s.starved_percent},
          {"inter_batch_p50_ms", s.inter_batch_p50_ms},
          {"inter_batch_p90_ms", s.inter_batch_p90_ms},
          {"inter_batch_p99_ms", s.inter_batch_p99_ms},
          {"inter_batch_max_ms", s.inter_batch_max_ms},
          {"receive_latency_p50_ms", s.receive_latency_p50_ms},
          {"server_worker_seconds", s.server_worker_seconds},
          {"server_images_per_worker_second", s.server_images_per_worker_second},
          {"batches_per_server", s.batches_per_server}};
}

// Bytes each field took over the whole run, and per image; the fields'
// share of the image bytes is their wire overhead.
void PrintFieldBytes(const std::map<std::string, int64_t>& bytes, int64_t images) {
  const auto image = bytes.find("image");
  const double image_bytes = image == bytes.end() ? 0.0 : static_cast<double>(image->second);
  std::printf("  per-field bytes (all batches, warm-up included):\n");
  for (const auto& [name, total] : bytes) {
    const double per = images > 0 ? static_cast<double>(total) / static_cast<double>(images) : 0.0;
    if (name == "image") {
      std::printf("    %-20s %14lld bytes %12.1f per sample\n", name.c_str(), static_cast<long long>(total), per);
    } else {
      std::printf("    %-20s %14lld bytes %12.1f per sample %8.3f%% of the image bytes\n", name.c_str(),
                  static_cast<long long>(total), per,
                  image_bytes > 0 ? 100.0 * static_cast<double>(total) / image_bytes : 0.0);
    }
  }
  std::fflush(stdout);
}

// The --device stager: the device, output type and normalisation from the
// flags, as many host slots as the client may hold. INVALID_ARGUMENT with the
// message stoker-bench prints.
absl::StatusOr<std::unique_ptr<DeviceStager>> MakeStager(const ClientConfig& config, ClientMetrics* metrics) {
  DeviceOptions d;
  const absl::StatusOr<DeviceOptions::Device> parsed = ParseDevice(absl::GetFlag(FLAGS_device));
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--device: ", parsed.status().message(), " (or none)"));
  }
  d.device = *parsed;
  if (!ParseTensorType(absl::GetFlag(FLAGS_out_dtype).c_str(), &d.type)) {
    return absl::InvalidArgumentError("--out-dtype must be float32, float16, bfloat16 or uint8");
  }
  d.normalize = absl::GetFlag(FLAGS_normalize);
  d.test_h2d_delay = absl::Milliseconds(absl::GetFlag(FLAGS_test_h2d_delay_ms));
  // As many as the client may hold (review 1.10: this was 4 with the
  // default --prefetch 0, while the client holds 2 x window x servers).
  d.host_slots = PrefetchDepth(config, static_cast<int>(config.servers.size())) + 2;
  auto s = DeviceStager::Create(d, metrics);
  if (!s.ok()) return absl::InvalidArgumentError(s.status().ToString());
  return s;
}

// One --log-batches line: the batch, its contents' hashes, when it came.
nlohmann::json LogLine(const Batch& batch, absl::Time t1, absl::Time run_start) {
  nlohmann::json line = {{"epoch", batch.epoch},
                         {"batch", batch.batch_index},
                         {"sample_indices", batch.sample_indices},
                         {"labels", batch.labels},
                         {"server", batch.server},
                         {"hash", Hash(batch.data)},
                         {"failed_samples", batch.failed_samples.size()},
                         {"time_ms", absl::ToInt64Milliseconds(t1 - run_start)},
                         {"unix_ms", absl::ToUnixMillis(t1)}};  // to line up with other processes' events
  if (!batch.fields.empty()) {
    nlohmann::json hashes;
    for (const v1::FieldData& f : batch.fields) {
      const absl::string_view region = absl::string_view(batch.field_data).substr(f.offset(), f.bytes());
      const XXH128_hash_t h = XXH3_128bits(region.data(), region.size());
      hashes[f.name()] = absl::StrFormat("%016x%016x", h.high64, h.low64);
    }
    line["field_hashes"] = hashes;
  }
  return line;
}

// The host-to-device copies over the run.
void PrintDeviceStats(DeviceStager& stager, const RunSummary& summary) {
  int64_t bytes = 0;
  double seconds = 0;
  stager.CopyStats(&bytes, &seconds);
  std::printf("  %-22s %12s\n", "device path", stager.path());
  std::printf("  %-22s %12.3f\n", "h2d GB", static_cast<double>(bytes) / 1e9);
  std::printf("  %-22s %12.2f\n", "h2d GB/s", seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0.0);
  std::printf("  %-22s %12.2f\n", "h2d ms per batch",
              summary.batches > 0 ? 1e3 * seconds / static_cast<double>(summary.batches) : 0.0);
  std::fflush(stdout);
}

// --json: the summary, fan-out and memory, the demand.
void WriteJson(const RunSummary& summary, const ClientMetrics& metrics, StokerClient& client) {
  nlohmann::json j = SummaryJson(summary);
  j["reassigned_batches"] = metrics.reassigned_batches->Value();  // batches a failed server had
  j["affinity_hits"] = metrics.affinity_hits->Value();            // shuffle=shards: batches made by their lane's server
  j["affinity_misses"] = metrics.affinity_misses->Value();
  // Fan-out and memory: streams opened over the run, the servers and
  // prefetch depth at its end, and the process's peak resident memory.
  j["streams_opened"] = metrics.streams_opened->Value();
  j["servers_in_use"] = metrics.servers_in_use->Value();
  j["prefetch_batches"] = metrics.prefetch_batches->Value();
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) j["max_rss_bytes"] = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  const DemandReport demand = client.meter().demand().Report();
  j["server_capacity_images_per_second"] = demand.mean_server_capacity;
  if (absl::GetFlag(FLAGS_step_ms) > 0) {  // else not estimated (see below)
    j["demand_images_per_second"] = demand.demand_images_per_second;
    j["servers_needed"] = demand.servers_needed;
  } else {
    j["demand_images_per_second"] = nullptr;
    j["servers_needed"] = nullptr;
  }
  std::ofstream(absl::GetFlag(FLAGS_json)) << j.dump(2) << '\n';
}

// How many servers this job needs (client/demand_meter.h; the recording
// rule stoker:servers_needed computes the same fleet-wide).
void PrintDemand(const ClientConfig& config, StokerClient& client) {
  // With no training step (--step-ms 0) the loop asks for batches as fast as
  // they come: its demand is unbounded, and no pool size follows from it.
  const DemandReport demand = client.meter().demand().Report();
  const bool has_step = absl::GetFlag(FLAGS_step_ms) > 0;
  if (has_step) std::printf("  %-22s %12.1f\n", "demand images/s", demand.demand_images_per_second);
  std::printf("  %-22s %12.1f\n", "capacity/server img/s", demand.mean_server_capacity);
  if (!has_step) {
    std::printf(
        "servers needed: not estimated (--step-ms 0: no training step, so the demand is as fast as batches "
        "come; give the job's step time in --step-ms to size the pool)\n");
  } else {
    std::printf("servers needed: %d (%s)\n", demand.servers_needed, demand.Explain().c_str());
  }
  if (has_step && config.world_size > 1) {
    std::printf(
        "  (for this rank's share, %d of %d: the job's ranks together need about %d times as much; the "
        "recording rule stoker:servers_needed sums them)\n",
        config.rank, config.world_size, config.world_size);
  }
  std::fflush(stdout);
}

// A --resume position; false when the file cannot be read or parsed.
bool ReadPosition(const std::string& path, v1::ClientPosition* position) {
  std::ifstream in(path, std::ios::binary);
  return in && position->ParseFromIstream(&in);
}

// The client's position into --save-position (written aside, then renamed).
void SavePosition(StokerClient& client) {
  if (absl::GetFlag(FLAGS_save_position).empty()) return;
  const std::string path = absl::GetFlag(FLAGS_save_position), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    client.Position().SerializeToOstream(&out);
  }
  std::rename(tmp.c_str(), path.c_str());
}

// One delivered batch into the epoch's stats, the run's (from after the
// warm-up: a warm-up batch restarts them) and the bytes per field.
void Tally(const Batch& batch, absl::Duration waited, absl::Time t1, bool warming_up, RunStats* epoch, RunStats* run,
           std::map<std::string, int64_t>* field_bytes) {
  const int64_t images = static_cast<int64_t>(batch.sample_indices.size());
  epoch->AddBatch(t1, waited, images, static_cast<int64_t>(batch.data.size()), batch.receive_latency, batch.server);
  if (warming_up) {
    run->Start(t1);  // the summary starts after the warm-up batches
  } else {
    run->AddBatch(t1, waited, images, static_cast<int64_t>(batch.data.size()), batch.receive_latency, batch.server);
    const v1::StageTimes& st = batch.stage_times;
    run->AddServerWork(st.read_seconds() + st.decode_seconds() + st.augment_seconds() + st.assemble_seconds());
  }
  (*field_bytes)["image"] += static_cast<int64_t>(batch.data.size());
  for (const v1::FieldData& f : batch.fields) (*field_bytes)[f.name()] += f.bytes();
}

// The consumer's side of a batch with a device: staged (copy + convert) and
// waited for; how long that took.
absl::StatusOr<absl::Duration> StageAndWait(DeviceStager& stager, Batch batch) {
  const absl::Time s0 = absl::Now();
  absl::StatusOr<DeviceTensor> tensor = stager.Stage(std::move(batch));
  if (!tensor.ok()) return tensor.status();
  if (absl::Status s = stager.Wait(*tensor); !s.ok()) return s;
  return absl::Now() - s0;
}

void PrintEpoch(int epoch, const RunSummary& s) {
  std::printf("epoch %d: %lld batches, %lld images in %.2f s: %.1f images/s, %.1f MB/s, starved %.1f%%\n", epoch,
              static_cast<long long>(s.batches), static_cast<long long>(s.images), s.seconds, s.images_per_second,
              s.megabytes_per_second, s.starved_percent);
  std::fflush(stdout);
}

// What a run keeps across its epochs.
struct RunState {
  explicit RunState(absl::Time t) : start(t), timeline(t) { total.Start(t); }
  absl::Time start;
  RunStats total;  // after the warm-up
  BatchTimeline timeline;
  std::map<std::string, int64_t> field_bytes;  // per field name, over the run
  int64_t delivered = 0;
  std::ofstream log;  // --log-batches
};

// One epoch's batches (up to --max-batches): each tallied, logged, staged
// on the device, then the simulated step. -1 at the epoch's end; else the
// exit code (0 when --stop-after-batches saved the position).
int RunBatches(int epoch, StokerClient& client, DeviceStager* stager, RunState* run, RunStats* stats) {
  const int max_batches = absl::GetFlag(FLAGS_max_batches);
  const int64_t warmup = absl::GetFlag(FLAGS_warmup_batches);
  const int64_t stop_after = absl::GetFlag(FLAGS_stop_after_batches);
  for (int n = 0; max_batches <= 0 || n < max_batches; ++n) {
    if (stop_after > 0 && run->delivered >= stop_after) {
      SavePosition(client);
      std::printf("stopped after %lld batches; position saved\n", static_cast<long long>(run->delivered));
      return 0;
    }
    Batch batch;
    bool end = false;
    const absl::Time t0 = absl::Now();
    if (absl::Status s = client.Next(&batch, &end); !s.ok()) {
      std::fprintf(stderr, "stoker-bench: epoch %d: %s\n", epoch, s.ToString().c_str());
      return 1;
    }
    if (end) break;
    const absl::Time t1 = absl::Now();
    BatchTiming& timing = run->timeline.Add(t1, t1 - t0, batch);
    Tally(batch, t1 - t0, t1, ++run->delivered <= warmup, stats, &run->total, &run->field_bytes);
    if (run->log.is_open()) run->log << LogLine(batch, t1, run->start).dump() << std::endl;  // flushed: tests follow it
    if (stager != nullptr) {
      absl::StatusOr<absl::Duration> staged = StageAndWait(*stager, std::move(batch));
      if (!staged.ok()) {
        std::fprintf(stderr, "stoker-bench: staging: %s\n", staged.status().ToString().c_str());
        return 1;
      }
      client.meter().OnH2d(*staged);
      timing.h2d_ms = absl::ToDoubleMilliseconds(*staged);
    }
    absl::SleepFor(absl::Milliseconds(absl::GetFlag(FLAGS_step_ms)));  // the simulated training step
  }
  return -1;
}

int Run() {
  absl::StatusOr<ClientConfig> config = ConfigFromFlags();
  if (!config.ok()) {
    std::fprintf(stderr, "stoker-bench: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  auto registry = std::make_shared<prometheus::Registry>();
  ClientMetrics metrics(*registry);
  std::unique_ptr<MetricsEndpoint> endpoint;
  if (absl::GetFlag(FLAGS_metrics_port) >= 0) {
    auto e = MetricsEndpoint::Start(absl::GetFlag(FLAGS_metrics_host), absl::GetFlag(FLAGS_metrics_port), registry);
    if (!e.ok()) {
      LOG(ERROR) << e.status();
      return 1;
    }
    endpoint = *std::move(e);
    std::printf("stoker-bench metrics on %s:%d\n", absl::GetFlag(FLAGS_metrics_host).c_str(), endpoint->port());
    std::fflush(stdout);
  }
  std::unique_ptr<DeviceStager> stager;
  if (absl::GetFlag(FLAGS_device) != "none") {
    absl::StatusOr<std::unique_ptr<DeviceStager>> s = MakeStager(*config, &metrics);
    if (!s.ok()) {
      std::fprintf(stderr, "stoker-bench: %s\n", std::string(s.status().message()).c_str());
      return 2;
    }
    stager = *std::move(s);
    config->buffers = stager->host_buffers();
    std::printf("device path: %s\n", stager->path());
  }
  auto client = StokerClient::Connect(*config, &metrics);
  if (!client.ok()) {
    std::fprintf(stderr, "stoker-bench: %s\n", client.status().ToString().c_str());
    return 1;
  }
  // Without a device, staging is the conversion on the host (issue 12).
  if (stager) (*client)->meter().SetDevicePath(stager->path());
  std::printf("dataset %s: %lld samples, %d classes, %lld batches/epoch, pipeline: %s\n",
              config->session.dataset().c_str(), static_cast<long long>((*client)->dataset().num_samples()),
              (*client)->dataset().class_names_size(), static_cast<long long>((*client)->BatchesPerEpoch()),
              PipelineToText({config->session.pipeline().begin(), config->session.pipeline().end()}).c_str());
  std::fflush(stdout);
  RunState run(absl::Now());
  if (!absl::GetFlag(FLAGS_log_batches).empty()) run.log.open(absl::GetFlag(FLAGS_log_batches));
  if (!absl::GetFlag(FLAGS_log_batches).empty() && !run.log) {
    std::fprintf(stderr, "stoker-bench: cannot write %s\n", absl::GetFlag(FLAGS_log_batches).c_str());
    return 2;
  }
  v1::ClientPosition resume_from;
  if (!absl::GetFlag(FLAGS_resume).empty() && !ReadPosition(absl::GetFlag(FLAGS_resume), &resume_from)) {
    std::fprintf(stderr, "stoker-bench: cannot read a position from %s\n", absl::GetFlag(FLAGS_resume).c_str());
    return 2;
  }
  const int first_epoch = static_cast<int>(resume_from.epoch());  // 0 without --resume
  for (int epoch = first_epoch; epoch < absl::GetFlag(FLAGS_epochs); ++epoch) {
    RunStats stats;
    stats.Start(absl::Now());
    const absl::Status started = epoch == first_epoch && !absl::GetFlag(FLAGS_resume).empty()
                                     ? (*client)->Resume(resume_from)
                                     : (*client)->StartEpoch(epoch);
    if (!started.ok()) {
      std::fprintf(stderr, "stoker-bench: %s\n", started.ToString().c_str());
      return 1;
    }
    if (const int exit = RunBatches(epoch, **client, stager.get(), &run, &stats); exit >= 0) return exit;
    PrintEpoch(epoch, stats.Finish(absl::Now()));
  }
  const RunSummary summary = run.total.Finish(absl::Now());
  PrintSummary(*config, summary);
  if (!config->session.fields().empty()) PrintFieldBytes(run.field_bytes, summary.images);
  if (absl::GetFlag(FLAGS_slowest) > 0) {
    std::printf("  slowest batches (inter-batch time; stage times in ms):\n");
    for (const BatchTiming& t : run.timeline.Slowest(static_cast<size_t>(absl::GetFlag(FLAGS_slowest)))) {
      std::printf("    %s\n", BatchTimeline::Describe(t).c_str());
    }
  }
  if (!absl::GetFlag(FLAGS_batch_times).empty()) {
    if (absl::Status s = run.timeline.Write(absl::GetFlag(FLAGS_batch_times)); !s.ok()) {
      std::fprintf(stderr, "stoker-bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (stager) PrintDeviceStats(*stager, summary);
  if (!absl::GetFlag(FLAGS_json).empty()) WriteJson(summary, metrics, **client);
  PrintDemand(*config, **client);
  const Verdict verdict = (*client)->meter().EvaluateAll();
  (*client)->meter().Evaluate();
  std::printf("bottleneck: %s (%s)\n", verdict.stage.c_str(), verdict.Explain().c_str());
  std::fflush(stdout);
  if (run.log.is_open()) run.log.close();
  SavePosition(**client);
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_linger_seconds)));
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  stoker::ParseFlags(
      argc, argv,
      "Stoker benchmark client: runs epochs against data servers with a simulated training step.\n"
      "Usage: stoker-bench --servers host:port,... --dataset NAME [--batch-size 256] [--epochs 1] [--step-ms 0]\n"
      "       stoker-bench --local-workers N --data-root DIR --dataset NAME ... (no servers: local mode alone)");
  stoker::TuneMallocForLargeBuffers();  // see malloc_tuning.h
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  stoker::ApplyLogLevelFromEnv();  // STOKER_LOG_LEVEL: debug, info, warning, error
  return stoker::Run();
}
