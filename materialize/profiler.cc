#include "materialize/profiler.h"

#include <unistd.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/stoker_client.h"
#include "dataplane/base/server_metrics.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sources/dataset.h"
#include "glog/logging.h"
#include "materialize/materializer.h"
#include "materialize/sample_subset.h"
#include "prometheus/registry.h"
#include "server/stoker_server.h"

namespace stoker {
namespace fs = std::filesystem;
namespace {

// One online pass over one strategy's data.
struct OnlineFigures {
  int64_t images = 0;
  double worker_seconds = 0;  // read + decode + augment + assemble, on the server
  int64_t wire_bytes = 0;     // batch bytes received
};

// A strategy as profiled: where its data is and what the rounds measured.
struct Trial {
  std::string dataset;        // as the servers name it
  int world_size = 1;         // the source: rank 0's share is about the sample
  std::vector<double> rates;  // images per worker-second, one per round
  int64_t images = 0, wire_bytes = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The training job's session: its whole pipeline, in floats when it ends in normalize.
v1::SessionConfig JobSession(const ProfileConfig& config) {
  v1::SessionConfig session;
  session.set_batch_size(config.batch_size);
  for (const v1::Op& op : config.pipeline) *session.add_pipeline() = op;
  if (MakesFloats(config.pipeline.back())) session.set_dtype(v1::FLOAT32);  // normalize needs floats
  return session;
}

absl::StatusOr<OnlineFigures> MeasureOnline(const ProfileConfig& config, const std::vector<std::string>& servers,
                                            const Trial& trial) {
  ClientConfig c;
  c.servers = servers;
  c.session = JobSession(config);
  c.session.set_dataset(trial.dataset);
  c.world_size = trial.world_size;
  c.epochs = 1;
  c.open_timeout = absl::Minutes(5);
  absl::StatusOr<std::unique_ptr<StokerClient>> client = StokerClient::Connect(c, nullptr);
  if (!client.ok()) return client.status();
  if (absl::Status s = (*client)->StartEpoch(0); !s.ok()) return s;
  OnlineFigures f;
  for (;;) {
    Batch batch;
    bool end = false;
    if (absl::Status s = (*client)->Next(&batch, &end); !s.ok()) return s;
    if (end) break;
    const v1::StageTimes& t = batch.stage_times;
    f.images += static_cast<int64_t>(batch.sample_indices.size() - batch.failed_samples.size());
    f.worker_seconds += t.read_seconds() + t.decode_seconds() + t.augment_seconds() + t.assemble_seconds();
    f.wire_bytes += static_cast<int64_t>(batch.data.size());
  }
  return f;
}

// The work directory, removed when the profile ends unless kept.
class WorkDir {
 public:
  WorkDir(fs::path path, bool keep) : path_(std::move(path)), keep_(keep) {}
  ~WorkDir() {
    std::error_code ec;
    if (!keep_ && created_) fs::remove_all(path_, ec);
  }
  absl::Status Create() {
    std::error_code ec;
    if (fs::exists(path_, ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the work directory ", path_.string(), " exists; name a new one (it is removed afterwards)"));
    }
    fs::create_directories(path_, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", path_.string(), ": ", ec.message()));
    created_ = true;
    return absl::OkStatus();
  }
  const fs::path& path() const { return path_; }

 private:
  const fs::path path_;
  const bool keep_;
  bool created_ = false;
};

absl::Status CheckConfig(const ProfileConfig& config) {
  if (config.dataset.empty()) return absl::InvalidArgumentError("--dataset is empty; name the dataset to profile");
  if (config.pipeline.empty())
    return absl::InvalidArgumentError("--pipeline is empty; give the training job's pipeline");
  if (config.formats.empty()) return absl::InvalidArgumentError("no storage format to try (--formats)");
  if (config.sample < 0) return absl::InvalidArgumentError(absl::StrCat("--sample = ", config.sample, "; need >= 0"));
  if (config.rounds < 1) return absl::InvalidArgumentError(absl::StrCat("--rounds = ", config.rounds, "; need >= 1"));
  if (config.batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--batch-size = ", config.batch_size, "; need >= 1"));
  }
  if (config.server_workers < 1 || config.offline_workers < 1) {
    return absl::InvalidArgumentError("--server-workers and --local-workers must be >= 1");
  }
  if (absl::StatusOr<Pipeline> p = Pipeline::Create(JobSession(config)); !p.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--pipeline: ", p.status().message()));
  }
  return absl::OkStatus();
}

// The dataset name under data_root of a directory below it, or an error.
absl::StatusOr<std::string> NameUnderRoot(const fs::path& dir, const fs::path& root) {
  std::error_code ec;
  const fs::path rel = fs::weakly_canonical(dir, ec).lexically_relative(fs::weakly_canonical(root, ec));
  if (ec || rel.empty() || *rel.begin() == "..") {
    return absl::InvalidArgumentError(absl::StrCat("the work directory ", dir.string(), " must lie under --data-root ",
                                                   root.string(), " (the servers open the sample's copies there)"));
  }
  return rel.string();
}

class Profiler {
 public:
  Profiler(const ProfileConfig& config, const ProfileProgressFn& progress) : config_(config), progress_(progress) {}
  absl::StatusOr<ProfileResult> Run();

 private:
  absl::Status MeasureSource(const SampleSource& source, Strategy& s, Trial& trial);
  absl::Status MaterialiseSample(const fs::path& work, size_t i, Strategy& s, Trial& trial);
  absl::Status MeasureOnlineRounds(std::vector<Strategy>& strategies, std::vector<Trial>& trials);
  void Step(const std::string& what);
  bool Cancelled() const { return config_.cancel != nullptr && config_.cancel->load(); }

  const ProfileConfig& config_;
  const ProfileProgressFn& progress_;
  int64_t size_ = 0, n_ = 0;  // the dataset's samples, the sample's
  int64_t done_ = 0, total_ = 0;
  absl::Time start_;
};

void Profiler::Step(const std::string& what) {
  ++done_;
  if (!progress_) return;
  ProfileProgress p{done_, total_, what};
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  p.steps_per_second = seconds > 0 ? static_cast<double>(done_) / seconds : 0;
  if (p.steps_per_second > 0) p.eta = absl::Seconds(static_cast<double>(total_ - done_) / p.steps_per_second);
  progress_(p);
}

absl::Status Profiler::MeasureSource(const SampleSource& source, Strategy& s, Trial& trial) {
  std::shared_ptr<const SampleSource> sample =
      EvenSample(std::shared_ptr<const SampleSource>(&source, [](const SampleSource*) {}), n_);
  double bytes = 0;
  for (int64_t i = 0; i < sample->size(); ++i) {
    absl::StatusOr<std::string> b = sample->Read(i);
    if (b.ok()) bytes += static_cast<double>(b->size());
  }
  s.stored_bytes_per_sample = bytes / static_cast<double>(n_);
  s.storage_bytes = s.stored_bytes_per_sample * static_cast<double>(size_);
  trial.dataset = config_.dataset;
  trial.world_size = static_cast<int>(std::max<int64_t>(1, size_ / n_));
  return absl::OkStatus();
}

absl::Status Profiler::MaterialiseSample(const fs::path& work, size_t i, Strategy& s, Trial& trial) {
  MaterializeConfig m;
  m.data_root = config_.data_root;
  m.dataset = config_.dataset;
  m.prefix = s.prefix;
  m.format = s.format;
  m.out = work / absl::StrFormat("s%02d", i);
  m.workers = config_.offline_workers;
  m.sample = n_;
  m.max_pixels = config_.max_pixels;
  m.max_file_bytes = config_.max_file_bytes;
  m.progress_every = absl::Hours(1);
  m.cancel = config_.cancel;
  absl::StatusOr<MaterializeReport> r = Materialize(m);
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat(s.name, ": ", r.status().message()));
  const double scale = static_cast<double>(size_) / static_cast<double>(n_);
  s.offline_seconds = absl::ToDoubleSeconds(r->took) * scale;
  s.storage_bytes = static_cast<double>(r->stored_bytes) * scale;
  s.stored_bytes_per_sample =
      static_cast<double>(r->stored_bytes) / static_cast<double>(std::max<int64_t>(1, r->manifest.samples));
  absl::StatusOr<std::string> name = NameUnderRoot(m.out, config_.data_root);
  if (!name.ok()) return name.status();
  trial.dataset = *name;
  return absl::OkStatus();
}

absl::Status Profiler::MeasureOnlineRounds(std::vector<Strategy>& strategies, std::vector<Trial>& trials) {
  std::vector<std::string> servers = config_.servers;
  prometheus::Registry registry;
  ServerMetrics metrics(registry);
  std::unique_ptr<StokerServer> server;
  if (servers.empty()) {
    ServerConfig sc;
    sc.host = "127.0.0.1";
    sc.core.data_root = config_.data_root;
    sc.core.workers = config_.server_workers;
    sc.core.max_pixels = config_.max_pixels;
    sc.core.catalog.max_file_bytes = config_.max_file_bytes;
    absl::StatusOr<std::unique_ptr<StokerServer>> started = StokerServer::Start(sc, &metrics);
    if (!started.ok()) return started.status();
    server = *std::move(started);
    servers = {absl::StrCat("127.0.0.1:", server->port())};
  }
  // Round 0 warms the page cache and the servers' dataset indexes; it is not counted.
  for (int round = 0; round <= config_.rounds; ++round) {
    for (size_t i = 0; i < strategies.size(); ++i) {
      if (Cancelled()) return absl::CancelledError("interrupted");
      absl::StatusOr<OnlineFigures> f = MeasureOnline(config_, servers, trials[i]);
      if (!f.ok()) return absl::Status(f.status().code(), absl::StrCat(strategies[i].name, ": ", f.status().message()));
      if (round > 0 && f->worker_seconds > 0) {
        trials[i].rates.push_back(static_cast<double>(f->images) / f->worker_seconds);
        trials[i].images += f->images;
        trials[i].wire_bytes += f->wire_bytes;
      }
      Step(round == 0 ? absl::StrCat("warm-up: ", strategies[i].name)
                      : absl::StrCat("online ", round, "/", config_.rounds, ": ", strategies[i].name));
    }
  }
  if (server) server->Shutdown(absl::Now() + absl::Seconds(5));
  for (size_t i = 0; i < strategies.size(); ++i) {
    strategies[i].images_per_worker_second = Median(trials[i].rates);
    if (trials[i].images > 0) {
      strategies[i].wire_bytes_per_sample = static_cast<double>(trials[i].wire_bytes) / trials[i].images;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ProfileResult> Profiler::Run() {
  if (absl::Status s = CheckConfig(config_); !s.ok()) return s;
  start_ = absl::Now();
  CatalogOptions options;
  options.max_file_bytes = config_.max_file_bytes;
  DatasetCatalog catalog(config_.data_root, options);
  SourceOrError source = catalog.Open(config_.dataset);
  if (!source.ok()) return source.status();
  if ((*source)->stored() != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset '", config_.dataset, "' is already materialised; profile its source"));
  }
  size_ = (*source)->size();
  n_ = config_.sample == 0 ? size_ : std::min(config_.sample, size_);
  WorkDir work(
      config_.work_dir.empty() ? config_.data_root / absl::StrCat(".stoker-profile-", getpid()) : config_.work_dir,
      config_.keep);
  if (absl::StatusOr<std::string> under = NameUnderRoot(work.path(), config_.data_root); !under.ok()) {
    return under.status();
  }
  if (absl::Status s = work.Create(); !s.ok()) return s;

  ProfileResult result;
  result.strategies = EnumerateStrategies(config_.pipeline, config_.formats);
  std::vector<Strategy>& strategies = result.strategies;
  std::vector<Trial> trials(strategies.size());
  total_ = static_cast<int64_t>(strategies.size() - 1) + static_cast<int64_t>(strategies.size()) * (config_.rounds + 1);
  LOG(INFO) << "profiling " << strategies.size() << " strategies of '" << PipelineToText(config_.pipeline) << "' on "
            << n_ << " of the " << size_ << " samples of '" << config_.dataset << "' in " << work.path().string();
  for (size_t i = 0; i < strategies.size(); ++i) {
    if (Cancelled()) return absl::CancelledError("interrupted");
    if (!strategies[i].materialised) {
      if (absl::Status s = MeasureSource(**source, strategies[i], trials[i]); !s.ok()) return s;
      continue;
    }
    if (absl::Status s = MaterialiseSample(work.path(), i, strategies[i], trials[i]); !s.ok()) return s;
    Step(absl::StrCat("offline: ", strategies[i].name));
  }
  if (absl::Status s = MeasureOnlineRounds(strategies, trials); !s.ok()) return s;
  MarkParetoFront(strategies);
  result.dataset = config_.dataset;
  result.pipeline = PipelineToText(config_.pipeline);
  result.dataset_samples = size_;
  result.sample = n_;
  result.server_workers = config_.servers.empty() ? config_.server_workers : 0;
  result.offline_workers = config_.offline_workers;
  result.rounds = config_.rounds;
  result.batch_size = config_.batch_size;
  return result;
}

}  // namespace

absl::StatusOr<ProfileResult> Profile(const ProfileConfig& config, const ProfileProgressFn& progress) {
  Profiler profiler(config, progress);
  return profiler.Run();
}

}  // namespace stoker
