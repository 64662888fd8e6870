// stoker-profile: measures every split point of a pipeline's deterministic
// prefix, with every storage format, on a sample of a dataset, and
// recommends where to split (see profiler.h, strategy.h, docs/materialize.md).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flag_names.h"
#include "common/log_level.h"
#include "common/progress_bar.h"
#include "dataplane/ops/pipeline_text.h"
#include "glog/logging.h"
#include "materialize/profile_report.h"
#include "materialize/profiler.h"
#include "materialize/tool_support.h"

ABSL_FLAG(std::string, data_root, ".", "Directory holding the dataset; the sample's copies are made under it");
ABSL_FLAG(std::string, dataset, "", "Dataset to profile, relative to --data-root (ImageFolder tree or tar shards)");
ABSL_FLAG(std::string, pipeline, "resize(256), random_resized_crop(224), random_horizontal_flip(0.5)",
          "The training job's whole pipeline; its leading deterministic ops are the split points tried");
ABSL_FLAG(int64_t, sample, 500, "Samples profiled, evenly spaced over the dataset; 0 means all");
ABSL_FLAG(std::string, formats, "raw,jpeg:90,png", "Storage encodings tried at each split point (comma-separated)");
ABSL_FLAG(std::string, compressions, "none,lz4,zstd", "Compressions tried with each encoding (comma-separated)");
ABSL_FLAG(std::string, weights, "0,0,1",
          "preprocessing,storage,throughput: how much offline seconds, bytes stored and online images per "
          "worker-second count in the recommendation (each normalised to 0..1 over the strategies)");
ABSL_FLAG(std::string, servers, "",
          "Data servers (host:port, comma-separated) to measure online throughput with; they must serve "
          "--data-root at the same path. Empty: one server in this process on 127.0.0.1");
ABSL_FLAG(int, server_workers, 1, "Worker threads of the in-process server (images/s are per worker-second)");
ABSL_FLAG(int, local_workers, 0, "Threads materialising the sample; 0 means one per CPU core");
ABSL_FLAG(int, batch_size, 32, "Samples per batch in the online measurements");
ABSL_FLAG(int, rounds, 3, "Online measurements per strategy, interleaved (after one warm-up); the median counts");
ABSL_FLAG(std::string, work_dir, "",
          "Where the sample's copies go (under --data-root, must not exist); "
          "empty: DATA_ROOT/.stoker-profile-PID. Removed at the end unless --keep");
ABSL_FLAG(bool, keep, false, "Keep the work directory");
ABSL_FLAG(std::string, json, "", "Write the results as JSON to this file");
ABSL_FLAG(std::string, html, "", "Write an HTML report (throughput-versus-storage chart and table) to this file");
ABSL_FLAG(std::string, progress, "auto", "auto (a bar on a terminal, log lines otherwise), bar, log or none");
ABSL_FLAG(int64_t, max_pixels, 100'000'000, "Largest source image (width x height) decoded; larger ones fail");
ABSL_FLAG(int64_t, max_file_bytes, int64_t{256} << 20, "Largest source file in bytes; larger ones fail");

namespace {

absl::StatusOr<std::vector<stoker::StoredFormat>> Formats() {
  std::vector<stoker::StoredFormat> out;
  for (absl::string_view e : absl::StrSplit(absl::GetFlag(FLAGS_formats), ',', absl::SkipWhitespace())) {
    for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_compressions), ',', absl::SkipWhitespace())) {
      absl::StatusOr<stoker::StoredFormat> f = stoker::ParseStoredFormat(e, c);
      if (!f.ok()) return f.status();
      out.push_back(*f);
    }
  }
  return out;
}

stoker::ProfileProgressFn MakeProgress(stoker::ProgressStyle style) {
  if (style == stoker::ProgressStyle::kNone) return {};
  return [style](const stoker::ProfileProgress& p) {
    stoker::ShowProgress(style, {p.done, p.total, p.steps_per_second, p.eta, "steps", p.step}, "profiled");
  };
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) LOG(ERROR) << "cannot write " << path;
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  stoker::ParseFlags(
      argc, argv,
      "Stoker profiler: tries every split point of a pipeline's deterministic prefix, each stored in every\n"
      "format and compression, on a sample of a dataset; measures offline seconds and storage (extrapolated to\n"
      "the whole dataset), online images per server worker-second (with a real server) and bytes per sample;\n"
      "marks the Pareto front and recommends a strategy for --weights.\n"
      "Usage: stoker-profile --data-root ROOT --dataset SRC --pipeline '...' --sample N [--servers ...]\n"
      "         [--weights preprocessing,storage,throughput] [--json FILE] [--html FILE]");
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  stoker::ApplyLogLevelFromEnv();  // STOKER_LOG_LEVEL: debug, info, warning, error
  const absl::StatusOr<stoker::ProgressStyle> style =
      stoker::ParseProgressStyle(absl::GetFlag(FLAGS_progress), isatty(STDERR_FILENO));
  if (!style.ok()) {
    LOG(ERROR) << style.status().message();
    return 2;
  }
  stoker::ProfileConfig config;
  config.data_root = absl::GetFlag(FLAGS_data_root);
  config.dataset = absl::GetFlag(FLAGS_dataset);
  absl::StatusOr<std::vector<stoker::v1::Op>> pipeline = stoker::ParsePipelineText(absl::GetFlag(FLAGS_pipeline));
  absl::StatusOr<std::vector<stoker::StoredFormat>> formats = Formats();
  absl::StatusOr<stoker::Weights> weights = stoker::ParseWeights(absl::GetFlag(FLAGS_weights));
  for (const absl::Status& s : {pipeline.status(), formats.status(), weights.status()}) {
    if (!s.ok()) {
      LOG(ERROR) << s.message();
      return 2;
    }
  }
  config.pipeline = *std::move(pipeline);
  config.formats = *std::move(formats);
  config.sample = absl::GetFlag(FLAGS_sample);
  config.servers = absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipWhitespace());
  config.server_workers = absl::GetFlag(FLAGS_server_workers);
  const int workers = absl::GetFlag(FLAGS_local_workers);
  config.offline_workers = workers > 0 ? workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config.batch_size = absl::GetFlag(FLAGS_batch_size);
  config.rounds = absl::GetFlag(FLAGS_rounds);
  config.work_dir = absl::GetFlag(FLAGS_work_dir);
  config.keep = absl::GetFlag(FLAGS_keep);
  config.max_pixels = absl::GetFlag(FLAGS_max_pixels);
  config.max_file_bytes = absl::GetFlag(FLAGS_max_file_bytes);
  config.cancel = stoker::CancelOnSignals();
  const bool bar = *style == stoker::ProgressStyle::kBar;
  const stoker::ProfileProgressFn progress = MakeProgress(*style);

  absl::StatusOr<stoker::ProfileResult> result = stoker::Profile(config, progress);
  if (bar) std::cerr << "\n";
  if (!result.ok()) {
    LOG(ERROR) << result.status();
    return absl::IsCancelled(result.status()) ? 130 : 1;
  }
  const size_t pick = stoker::Recommend(result->strategies, *weights);
  std::cout << stoker::ProfileTable(*result, *weights, pick) << std::flush;
  bool ok = true;
  if (!absl::GetFlag(FLAGS_json).empty()) {
    ok &= WriteFile(absl::GetFlag(FLAGS_json), stoker::ProfileJson(*result, *weights, pick).dump(2) + "\n");
  }
  if (!absl::GetFlag(FLAGS_html).empty()) {
    ok &= WriteFile(absl::GetFlag(FLAGS_html), stoker::ProfileHtml(*result, *weights, pick));
  }
  return ok ? 0 : 1;
}
