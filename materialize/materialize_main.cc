// stoker-materialize: runs a pipeline's deterministic prefix over a dataset
// once and stores the result for data servers to serve (see
// materializer.h and docs/materialize.md).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flag_names.h"
#include "common/log_level.h"
#include "common/progress_bar.h"
#include "dataplane/ops/pipeline_text.h"
#include "glog/logging.h"
#include "materialize/materializer.h"
#include "materialize/remote_maker.h"
#include "materialize/tool_support.h"
#include "storage/storage_flags.h"

ABSL_FLAG(std::string, data_root, ".",
          "Directory holding the source dataset, or an s3://, http(s):// or catalog:FILE root (the source is "
          "copied into --cache-dir first; the output stays local)");
ABSL_FLAG(std::string, dataset, "", "Source dataset, relative to --data-root (ImageFolder tree or tar shards)");
ABSL_FLAG(std::string, prefix, "resize(256)",
          "Deterministic ops to run once and store, e.g. 'resize(256)' or 'resize(256), center_crop(224)'; "
          "empty stores decoded pixels. Random ops are refused: they stay online");
ABSL_FLAG(std::string, format, "raw", "How samples are stored: raw (uint8 .npy arrays), jpeg:QUALITY (1..100) or png");
ABSL_FLAG(std::string, compression, "none", "Per-sample compression: none, zstd[:LEVEL] or lz4[:LEVEL]");
ABSL_FLAG(std::string, out, "", "Output directory (must not exist unless --overwrite); built in OUT.partial first");
ABSL_FLAG(int, local_workers, 0, "Worker threads that make samples; 0 means one per CPU core (not with --servers)");
ABSL_FLAG(std::string, servers, "",
          "Data servers that make the samples instead of local workers: host:port entries, comma-separated, or "
          "one dns:///name:port. They must serve --dataset under their own --data-root; --data-root is then unused");
ABSL_FLAG(int64_t, batch_size, 16, "With --servers: samples per request (lowered to divide the shard size on resume)");
ABSL_FLAG(int64_t, shard_samples, 0, "Samples per shard; 0 sizes shards to about --shard-mib each");
ABSL_FLAG(int64_t, shard_mib, 256, "Target shard size in MiB when --shard-samples is 0 (large sequential reads)");
ABSL_FLAG(bool, overwrite, false, "Replace an existing --out, once the new output is complete");
ABSL_FLAG(int64_t, max_pixels, 100'000'000, "Largest source image (width x height) decoded; larger ones fail");
ABSL_FLAG(int64_t, max_file_bytes, int64_t{256} << 20, "Largest source file in bytes; larger ones fail");
ABSL_FLAG(std::string, progress, "auto", "auto (a bar on a terminal, log lines otherwise), bar, log or none");
ABSL_FLAG(int, test_sample_delay_ms, 0, "Test only: extra milliseconds per sample (a slow run to interrupt)");

namespace {

stoker::ProgressFn MakeProgress(stoker::ProgressStyle style) {
  if (style == stoker::ProgressStyle::kNone) return {};
  return [style](const stoker::MaterializeProgress& p) {
    stoker::ShowProgress(style,
                         {p.done, p.total, p.samples_per_second, p.eta, "samples",
                          p.failed > 0 ? absl::StrCat(p.failed, " failed") : ""},
                         "materialised");
  };
}

}  // namespace

int main(int argc, char** argv) {
  stoker::ParseFlags(
      argc, argv,
      "Stoker materialiser: runs a pipeline's deterministic prefix once over a dataset and stores the\n"
      "result as WebDataset tar shards plus manifest.json, which stoker-server serves as a dataset.\n"
      "Usage: stoker-materialize --data-root ROOT --dataset SRC --prefix 'resize(256)'\n"
      "         --format raw|jpeg:QUALITY|png --compression none|zstd|lz4 --out DIR [--local-workers N]\n"
      "   or: stoker-materialize --servers HOST:PORT,... --dataset SRC ... --out DIR  (the servers make the samples)\n"
      "An interrupted run (Ctrl-C, a crash, SIGKILL) resumes when the same command is run again.");
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  stoker::ApplyLogLevelFromEnv();  // STOKER_LOG_LEVEL: debug, info, warning, error
  const absl::StatusOr<stoker::ProgressStyle> style =
      stoker::ParseProgressStyle(absl::GetFlag(FLAGS_progress), isatty(STDERR_FILENO));
  if (!style.ok()) {
    LOG(ERROR) << style.status().message();
    return 2;
  }
  stoker::MaterializeConfig config;
  config.data_root = absl::GetFlag(FLAGS_data_root);
  std::unique_ptr<stoker::StoreMirror> mirror;  // a remote source's store and local copy
  if (stoker::IsRemoteRoot(absl::GetFlag(FLAGS_data_root))) {
    absl::StatusOr<std::unique_ptr<stoker::StoreMirror>> m = stoker::MirrorFromFlags(absl::GetFlag(FLAGS_data_root));
    if (!m.ok()) {
      LOG(ERROR) << "--data-root " << absl::GetFlag(FLAGS_data_root) << ": " << m.status();
      return 2;
    }
    mirror = *std::move(m);
    config.data_root = mirror->local_root();
    config.fetch = mirror->Fetcher();
    config.streamed = mirror->Streamer();
  }
  config.dataset = absl::GetFlag(FLAGS_dataset);
  config.out = absl::GetFlag(FLAGS_out);
  if (config.dataset.empty() || config.out.empty()) {
    LOG(ERROR) << "--dataset and --out are required (see --help)";
    return 2;
  }
  const std::string prefix_text = absl::GetFlag(FLAGS_prefix);
  absl::StatusOr<std::vector<stoker::v1::Op>> prefix = absl::StripAsciiWhitespace(prefix_text).empty()
                                                           ? std::vector<stoker::v1::Op>{}  // decoded pixels
                                                           : stoker::ParsePipelineText(prefix_text);
  absl::StatusOr<stoker::StoredFormat> format =
      stoker::ParseStoredFormat(absl::GetFlag(FLAGS_format), absl::GetFlag(FLAGS_compression));
  if (!prefix.ok() || !format.ok()) {
    LOG(ERROR) << (!prefix.ok() ? absl::StrCat("--prefix: ", prefix.status().message())
                                : std::string(format.status().message()));
    return 2;
  }
  config.prefix = *std::move(prefix);
  config.format = *format;
  const int workers = absl::GetFlag(FLAGS_local_workers);
  config.workers = workers > 0 ? workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config.shard_samples = absl::GetFlag(FLAGS_shard_samples);
  config.shard_bytes = std::max<int64_t>(1, absl::GetFlag(FLAGS_shard_mib)) << 20;
  config.overwrite = absl::GetFlag(FLAGS_overwrite);
  config.max_pixels = absl::GetFlag(FLAGS_max_pixels);
  config.max_file_bytes = absl::GetFlag(FLAGS_max_file_bytes);
  config.test_sample_delay = absl::Milliseconds(absl::GetFlag(FLAGS_test_sample_delay_ms));
  config.cancel = stoker::CancelOnSignals();
  const std::vector<std::string> servers = absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipWhitespace());
  if (!servers.empty()) {
    stoker::RemoteOptions remote;
    remote.servers = servers;
    config.remote = stoker::RemoteOnServers(remote);
    config.batch_size = absl::GetFlag(FLAGS_batch_size);
    if (workers > 0) LOG(WARNING) << "--local-workers is not used with --servers: the servers make the samples";
  }
  const bool bar = *style == stoker::ProgressStyle::kBar;
  const stoker::ProgressFn progress = MakeProgress(*style);
  config.progress_every = bar ? absl::Milliseconds(250) : absl::Seconds(10);

  absl::StatusOr<stoker::MaterializeReport> report = stoker::Materialize(config, progress);
  if (bar) std::cerr << "\n";
  if (!report.ok()) {
    LOG(ERROR) << report.status();
    return absl::IsCancelled(report.status()) ? 130 : 1;
  }
  const stoker::Manifest& m = report->manifest;
  // Machine-readable summary (tests and scripts parse it).
  std::cout << "stoker-materialize: " << m.samples << " samples (" << m.failed.size() << " failed) in "
            << m.shards.size() << " shards, " << report->stored_bytes << " bytes, " << report->shards_resumed
            << " shards resumed, " << absl::ToDoubleSeconds(report->took) << " s -> " << report->out.string()
            << std::endl;
  for (const stoker::Manifest::Failed& f : m.failed) {
    LOG(WARNING) << "sample " << f.index << " (" << f.path << ") was not stored: " << f.reason;
  }
  return 0;
}
