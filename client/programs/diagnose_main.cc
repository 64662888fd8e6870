// stoker-diagnose: runs the caching ladder (see ladder.h) against data
// servers and names the stage that limits the training loop, with the gain
// removing it could give.
#include <cstdio>
#include <fstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/device/device_stager.h"
#include "client/programs/ladder.h"
#include "client/security_flags.h"
#include "client/stoker_client.h"
#include "common/flag_names.h"
#include "common/log_level.h"
#include "common/malloc_tuning.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"
#include "glog/logging.h"
#include "storage/storage_flags.h"
#include "storage/store_probe.h"

ABSL_FLAG(std::string, servers, "", "Data servers: host:port,... or dns:///name:port");
ABSL_FLAG(std::string, dataset, "", "Dataset name under each server's --data-root");
ABSL_FLAG(int, batch_size, 64, "Samples per batch");
ABSL_FLAG(std::string, pipeline, "", "Ops (as stoker-bench); empty: RandomResizedCrop(224) + flip");
ABSL_FLAG(double, step_ms, 0, "Simulated training step per batch, in milliseconds");
ABSL_FLAG(int, batches, 30, "Batches measured per step of the ladder");
ABSL_FLAG(int, warmup_batches, 3, "Batches left out at the start of each step");
ABSL_FLAG(std::string, device, "auto", "auto, cuda or cpu: where batches are staged (as stoker-bench)");
ABSL_FLAG(std::string, json, "", "Write the ladder as JSON to this file");
ABSL_FLAG(std::string, html, "", "Write a self-contained HTML report with a bar chart to this file");
ABSL_FLAG(int, local_workers, 0,
          "Threads in this process that read, decode and augment (local mode, as stoker-bench's; 0: off): with no "
          "--servers, the ladder measures this machine's own pipeline over --data-root");
ABSL_FLAG(std::string, data_root, "",
          "The dataset's root: in local mode the folder (or store URL) the local workers read; with --servers, "
          "the servers' remote --data-root (s3://, http(s)://, catalog:FILE; with the storage flags below), for "
          "which the ladder adds a cold cache's first epoch, timing a copy from the store to this machine (run it "
          "on a server node to measure the servers' path)");
ABSL_FLAG(int64_t, store_probe_mb, 256,
          "Megabytes of the dataset read from --data-root's store to time it (in the servers' ranged reads, "
          "--fetch-parallel in flight; the bytes are dropped)");

namespace stoker {
namespace {

// The consumer's work on one staged batch: wait for it, then the step.
absl::Status Consume(DeviceStager& stager, const DeviceTensor& t, absl::Duration step) {
  if (absl::Status s = stager.Wait(t); !s.ok()) return s;
  absl::SleepFor(step);
  return absl::OkStatus();
}

absl::StatusOr<double> RunThroughServers(const ClientConfig& base, v1::CacheMode mode, DeviceStager& stager,
                                         absl::Duration step, int warmup, int batches) {
  ClientConfig c = base;
  c.session.set_cache_mode(mode);
  auto client = StokerClient::Connect(c, nullptr);
  if (!client.ok()) return client.status();
  int64_t epoch = 0, images = 0;
  if (absl::Status s = (*client)->StartEpoch(epoch); !s.ok()) return s;
  absl::Time start = absl::Now();
  for (int n = 0; n < warmup + batches;) {
    Batch batch;
    bool end = false;
    if (absl::Status s = (*client)->Next(&batch, &end); !s.ok()) return s;
    if (end) {
      if (absl::Status s = (*client)->StartEpoch(++epoch); !s.ok()) return s;
      continue;
    }
    const int64_t count = static_cast<int64_t>(batch.sample_indices.size());
    absl::StatusOr<DeviceTensor> t = stager.Stage(std::move(batch));
    if (!t.ok()) return t.status();
    if (absl::Status s = Consume(stager, *t, step); !s.ok()) return s;
    if (++n == warmup) {
      start = absl::Now();
    } else if (n > warmup) {
      images += count;
    }
  }
  return static_cast<double>(images) / std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start));
}

// The seconds a cold cache's copy of `dataset` from the store at `root`
// takes, timed on part of it from this machine (0 for a local root: no copy).
absl::StatusOr<double> StoreCopySeconds(const std::string& root, const std::string& dataset) {
  if (!IsRemoteRoot(root)) {
    std::printf("  --data-root %s is local: no copy, the full pipeline's read is the store\n", root.c_str());
    return 0.0;
  }
  absl::StatusOr<StorageOptions> options = StorageOptionsFromFlags();
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<Storage>> store = OpenStorage(root, *options);
  if (!store.ok()) return store.status();
  const int64_t probe = std::max<int64_t>(1, absl::GetFlag(FLAGS_store_probe_mb)) << 20;
  absl::StatusOr<StoreProbe> p = ProbeStore(**store, dataset, probe, FetchOptionsFromFlags());
  if (!p.ok()) return p.status();
  std::printf(
      "  store %s: %lld objects, %.1f MB (listed in %.2f s); %.1f MB of %lld objects read in %.2f s: "
      "%.1f MB/s, a cold cache's copy takes about %.1f s\n",
      (*store)->Describe(dataset).c_str(), static_cast<long long>(p->dataset_objects), p->dataset_bytes / 1e6,
      p->list_seconds, p->bytes_read / 1e6, static_cast<long long>(p->objects_read), p->seconds,
      p->bytes_per_second() / 1e6, p->copy_seconds());
  std::fflush(stdout);
  return p->copy_seconds();
}

int Run() {
  ClientConfig c;
  c.servers = absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipWhitespace());
  c.security = stoker::SecurityFromFlags();
  c.local.workers = absl::GetFlag(FLAGS_local_workers);
  if (c.local.workers > 0) c.local.data_root = absl::GetFlag(FLAGS_data_root);
  if ((c.servers.empty() && c.local.workers <= 0) || absl::GetFlag(FLAGS_dataset).empty()) {
    std::fprintf(stderr,
                 "stoker-diagnose: --dataset is required, and --servers or --local-workers N (local mode, with "
                 "--data-root)\n");
    return 2;
  }
  if (c.servers.empty() && c.local.data_root.empty()) {
    std::fprintf(stderr, "stoker-diagnose: local mode (--local-workers) needs --data-root, the dataset's root\n");
    return 2;
  }
  c.session.set_dataset(absl::GetFlag(FLAGS_dataset));
  c.session.set_batch_size(absl::GetFlag(FLAGS_batch_size));
  std::string text = absl::GetFlag(FLAGS_pipeline);
  if (text.empty()) text = std::string(kDefaultTrainPipeline);
  auto ops = ParsePipelineText(text);
  if (!ops.ok()) {
    std::fprintf(stderr, "stoker-diagnose: %s\n", std::string(ops.status().message()).c_str());
    return 2;
  }
  for (auto& op : *ops) *c.session.add_pipeline() = op;
  DeviceOptions d;
  const absl::StatusOr<DeviceOptions::Device> device = ParseDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) {
    std::fprintf(stderr, "stoker-diagnose: --device: %s\n", std::string(device.status().message()).c_str());
    return 2;
  }
  d.device = *device;
  auto stager = DeviceStager::Create(d, nullptr);
  if (!stager.ok()) {
    std::fprintf(stderr, "stoker-diagnose: %s\n", stager.status().ToString().c_str());
    return 2;
  }
  c.buffers = (*stager)->host_buffers();
  const absl::Duration step = absl::Milliseconds(absl::GetFlag(FLAGS_step_ms));
  const int batches = std::max(1, absl::GetFlag(FLAGS_batches)),
            warmup = std::max(0, absl::GetFlag(FLAGS_warmup_batches));
  const std::string where = c.servers.empty()
                                ? absl::StrCat(c.local.workers, " local worker(s) over ", c.local.data_root)
                                : absl::GetFlag(FLAGS_servers);
  std::printf("stoker-diagnose: %s on %s, batch %d, step %.1f ms, device path %s, %d batches per step\n", text.c_str(),
              where.c_str(), c.session.batch_size(), absl::GetFlag(FLAGS_step_ms), (*stager)->path(), batches);
  std::fflush(stdout);

  // One real batch for the two client-side steps.
  auto client = StokerClient::Connect(c, nullptr);
  if (!client.ok()) {
    std::fprintf(stderr, "stoker-diagnose: %s\n", client.status().ToString().c_str());
    return 1;
  }
  Batch cached;
  bool end = false;
  if (!(*client)->StartEpoch(0).ok() || !(*client)->Next(&cached, &end).ok() || end) {
    std::fprintf(stderr, "stoker-diagnose: could not fetch a first batch\n");
    return 1;
  }
  const int64_t num_samples = (*client)->dataset().num_samples();
  client->reset();
  const double per_batch = static_cast<double>(cached.sample_indices.size());
  std::vector<LadderStep> steps = LadderSteps();
  {  // 1. device-cached: one staged batch fed again and again
    auto t = (*stager)->StageBorrowed(cached);
    if (!t.ok()) {
      std::fprintf(stderr, "stoker-diagnose: %s\n", t.status().ToString().c_str());
      return 1;
    }
    const absl::Time start = absl::Now();
    for (int n = 0; n < batches; ++n) Consume(**stager, *t, step).IgnoreError();
    steps[0].images_per_second = per_batch * batches / std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start));
  }
  {  // 2. host-cached: the batch copied to the device each step
    const absl::Time start = absl::Now();
    for (int n = 0; n < batches; ++n) {
      auto t = (*stager)->StageBorrowed(cached);
      if (!t.ok()) return 1;
      Consume(**stager, *t, step).IgnoreError();
    }
    steps[1].images_per_second = per_batch * batches / std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start));
  }
  const v1::CacheMode modes[] = {v1::CACHE_BATCH, v1::CACHE_DECODED, v1::CACHE_RAW, v1::CACHE_NONE};
  for (int i = 0; i < 4; ++i) {
    auto rate = RunThroughServers(c, modes[i], **stager, step, warmup, batches);
    if (!rate.ok()) {
      std::fprintf(stderr, "stoker-diagnose: step '%s': %s\n", steps[2 + i].name.c_str(),
                   rate.status().ToString().c_str());
      return 1;
    }
    steps[2 + i].images_per_second = *rate;
    std::printf("  measured %-24s %10.1f images/s\n", steps[2 + i].name.c_str(), *rate);
    std::fflush(stdout);
  }
  if (const std::string root = absl::GetFlag(FLAGS_data_root); !root.empty()) {
    absl::StatusOr<double> copy = StoreCopySeconds(root, c.session.dataset());
    if (!copy.ok()) {
      std::fprintf(stderr, "stoker-diagnose: --data-root %s: %s\n", root.c_str(), copy.status().ToString().c_str());
      return 1;
    }
    if (*copy > 0) steps.push_back(ColdCacheStep(steps.back().images_per_second, *copy, num_samples));  // full
  }
  const LadderResult result =
      AnalyzeLadder(std::move(steps), c.servers.empty() || ServersShareCores(c.servers), 0.10, StartsWithCrop(*ops));
  std::printf("\n%s", LadderTable(result).c_str());
  std::fflush(stdout);
  if (!absl::GetFlag(FLAGS_json).empty()) std::ofstream(absl::GetFlag(FLAGS_json)) << LadderJson(result) << "\n";
  if (!absl::GetFlag(FLAGS_html).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_html)) << LadderHtml(result, "Stoker caching ladder: " + c.session.dataset());
  }
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  stoker::ParseFlags(argc, argv,
                     "Finds the input bottleneck by caching at each stage of the path.\n"
                     "Usage: stoker-diagnose --servers host:port,... --dataset NAME [--batch-size 64] [--step-ms S] "
                     "[--data-root s3://...|https://...] [--json FILE] [--html FILE]\n"
                     "       stoker-diagnose --local-workers N --data-root DIR --dataset NAME ... (local mode)");
  stoker::TuneMallocForLargeBuffers();  // see malloc_tuning.h
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  stoker::ApplyLogLevelFromEnv();  // STOKER_LOG_LEVEL: debug, info, warning, error
  return stoker::Run();
}
