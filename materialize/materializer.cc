#include "materialize/materializer.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sessions/store_output.h"
#include "dataplane/sources/dataset.h"
#include "glog/logging.h"
#include "materialize/sample_subset.h"
#include "materialize/shard_writer.h"
#include "materialize/work_dir.h"

namespace stoker {
namespace fs = std::filesystem;
namespace {

constexpr int kEstimateSamples = 8;  // made to size shards before the run

class Run {
 public:
  // Exactly one of `source` (local workers) and `remote` is set.
  Run(const MaterializeConfig& config, std::shared_ptr<const SampleSource> source, std::unique_ptr<RemoteMaker> remote,
      Pipeline prefix)
      : config_(config),
        source_(std::move(source)),
        remote_(std::move(remote)),
        prefix_(std::move(prefix)),
        dir_(config.out),
        fingerprint_(source_ ? source_->fingerprint() : remote_->fingerprint()),
        size_(source_ ? source_->size() : remote_->size()),
        class_names_(source_ ? source_->class_names() : remote_->class_names()) {}

  absl::StatusOr<MaterializeReport> Go(const ProgressFn& progress);

 private:
  MaterializeJob ThisJob(int64_t shard_samples) const;
  // Resumes the interrupted run in OUT.partial, or starts one.
  absl::Status PrepareWorkDir();
  // A run cut short after writing its manifest: that manifest, if it is this run's.
  std::optional<Manifest> FinishedManifest() const;
  absl::StatusOr<int64_t> EstimateShardSamples();
  // The sample with its fields, or why it failed.
  MadeSample MakeSample(int64_t index);
  // A shard being written: opened, each of its samples added in order, closed.
  struct Building {
    ShardRecord record;
    fs::path tmp;
    ShardWriter writer;
  };
  absl::Status OpenShard(int64_t shard, Building* b);
  absl::Status AddToShard(Building& b, const MadeSample& sample);
  absl::Status CloseShard(int64_t shard, Building& b);
  absl::Status MakeShard(int64_t shard);
  // Remote: samples per request, dividing shard_samples_ unless one shard holds all.
  int64_t RemoteBatchSize() const;
  // Makes the pending shards on the servers, writing each as its samples arrive.
  absl::Status RunRemote(const ProgressFn& progress);
  absl::Status CancelledError() const;
  // Reads the records of shards an earlier run made; the rest are pending.
  void LoadRecords();
  // Makes the pending shards on the worker threads, reporting progress.
  absl::Status RunWorkers(const ProgressFn& progress);
  void Work();
  // Places the output and sums the run up.
  absl::StatusOr<MaterializeReport> Finish(Manifest manifest, int64_t made, absl::Time began);
  bool Cancelled() const { return config_.cancel != nullptr && config_.cancel->load(); }
  void Report(const ProgressFn& progress, bool final);
  absl::StatusOr<Manifest> WriteManifest();

  const MaterializeConfig config_;
  const std::shared_ptr<const SampleSource> source_;
  const std::unique_ptr<RemoteMaker> remote_;
  const Pipeline prefix_;
  WorkDir dir_;  // OUT.partial.lock is held for the whole run: two runs never share OUT.partial
  const std::string fingerprint_;
  const int64_t size_;
  const std::vector<std::string> class_names_;
  int64_t shard_samples_ = 0, shards_ = 0;
  std::vector<int64_t> pending_;      // shards to make, in order
  std::vector<ShardRecord> records_;  // by shard, filled as they finish
  int64_t resumed_ = 0;
  absl::Time start_;
  int64_t done_at_start_ = 0;

  std::atomic<size_t> next_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> done_{0}, failed_{0}, stored_bytes_{0};
  std::atomic<int64_t> dropped_fields_{0};  // source members whose names the stored dataset reserves
  absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
};

MaterializeJob Run::ThisJob(int64_t shard_samples) const {
  return {fingerprint_, PipelineToText(prefix_.ops()), config_.format.Name(), size_, shard_samples};
}

MadeSample Run::MakeSample(int64_t index) {
  if (config_.test_sample_delay > absl::ZeroDuration()) absl::SleepFor(config_.test_sample_delay);
  MadeSample m;
  m.index = index;
  m.label = source_->label(index);
  m.stored = [&]() -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> bytes;
    try {
      bytes = source_->Read(index);
      if (bytes.ok()) {
        absl::StatusOr<std::vector<StoredField>> fields =
            ReadStoredFields(*source_, index, config_.format, &dropped_fields_);
        if (!fields.ok()) return fields.status();
        m.fields = *std::move(fields);
      }
    } catch (const std::exception& e) {  // e.g. bad_alloc: this sample's failure
      return absl::ResourceExhaustedError(absl::StrCat("reading ", source_->Describe(index), ": ", e.what()));
    }
    if (!bytes.ok()) return bytes.status();
    SampleTimes times;
    return MakeStoredSample(prefix_, config_.format, *bytes, config_.max_pixels, &times);
  }();
  if (!m.stored.ok()) {
    m.fields.clear();
    m.path = source_->Describe(index);
  }
  return m;
}

absl::StatusOr<int64_t> Run::EstimateShardSamples() {
  if (config_.shard_samples > 0) return std::min(config_.shard_samples, size_);
  const int64_t n = size_;
  int64_t made = 0, bytes = 0;
  auto count = [&](const MadeSample& sample) {
    if (!sample.stored.ok()) return;
    ++made;
    bytes += static_cast<int64_t>(sample.stored->size()) + 2048;  // two tar headers and padding
    for (const StoredField& f : sample.fields) bytes += static_cast<int64_t>(f.bytes.size()) + 1024;
  };
  const int64_t batch = std::clamp<int64_t>(config_.batch_size, 1, n);
  if (remote_) {  // the first batch, made by the servers
    absl::Status s = remote_->Make(
        batch, {0},
        [&](MadeSample m) {
          count(m);
          return absl::OkStatus();
        },
        config_.cancel);
    if (!s.ok()) return s;
  } else {
    for (int64_t i = 0; i < std::min<int64_t>(n, kEstimateSamples); ++i) count(MakeSample(i));
  }
  int64_t per_shard = made > 0 ? std::max<int64_t>(1, config_.shard_bytes / std::max<int64_t>(1, bytes / made)) : 1000;
  if (remote_) {  // whole batches: one shard is written as its batches arrive, in order
    return std::min(n, (per_shard + batch - 1) / batch * batch);
  }
  const int64_t spread = (n + 4 * config_.workers - 1) / (4 * config_.workers);  // four shards per worker
  per_shard = std::clamp<int64_t>(std::min(per_shard, spread), 1, n);
  return per_shard;
}

absl::Status Run::PrepareWorkDir() {
  absl::StatusOr<std::optional<MaterializeJob>> old = dir_.ReadJob();
  if (!old.ok()) return old.status();
  if (*old) {
    if (std::string diff = ThisJob((*old)->shard_samples).Differs(**old); !diff.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir_.path().string(), " holds an interrupted run with other settings: ", diff,
          ". Rerun with the same settings to finish it, or delete ", dir_.path().string(), " to start again"));
    }
    shard_samples_ = (*old)->shard_samples;
    LOG(INFO) << "resuming the interrupted run in " << dir_.path().string();
  } else {
    if (absl::Status s = dir_.Clear(); !s.ok()) return s;
    absl::StatusOr<int64_t> per_shard = EstimateShardSamples();
    if (!per_shard.ok()) return per_shard.status();
    shard_samples_ = *per_shard;
    if (absl::Status s = dir_.WriteJob(ThisJob(shard_samples_)); !s.ok()) return s;
  }
  dir_.DropUnfinishedShards();
  return absl::OkStatus();
}

std::optional<Manifest> Run::FinishedManifest() const {
  std::optional<Manifest> m = dir_.FinishedManifest();
  if (!m || m->source_fingerprint != fingerprint_ || m->source_samples != size_ ||
      PipelineToText(m->prefix) != PipelineToText(prefix_.ops()) || m->format.Name() != config_.format.Name()) {
    return std::nullopt;
  }
  return m;
}

absl::Status Run::OpenShard(int64_t shard, Building* b) {
  ShardRecord& r = b->record;
  r.shard.name = ShardName(shard);
  r.begin = shard * shard_samples_;
  r.end = std::min(size_, r.begin + shard_samples_);
  b->tmp = dir_.path() / (r.shard.name + ".tmp");
  return b->writer.Open(b->tmp);
}

absl::Status Run::AddToShard(Building& b, const MadeSample& m) {
  ShardRecord& r = b.record;
  done_.fetch_add(1);
  if (!m.stored.ok()) {
    r.failed.push_back({m.index, m.path, std::string(m.stored.status().message())});
    failed_.fetch_add(1);
    return absl::OkStatus();
  }
  const std::string key = absl::StrFormat("%09d", m.index);
  if (absl::Status s = b.writer.Add(absl::StrCat(key, ".", config_.format.Field()), *m.stored); !s.ok()) return s;
  if (absl::Status s = b.writer.Add(absl::StrCat(key, ".cls"), std::to_string(m.label)); !s.ok()) return s;
  // Checked by the server on every read (a shard changed in place fails its samples as corrupt).
  if (absl::Status s = b.writer.Add(absl::StrCat(key, ".", kStoredChecksumField), StoredChecksum(*m.stored)); !s.ok()) {
    return s;
  }
  for (const StoredField& f : m.fields) {
    if (absl::Status s = b.writer.Add(absl::StrCat(key, ".", f.extension), f.bytes); !s.ok()) return s;
    r.fields.insert(f.extension);
  }
  if (!m.fields.empty()) {
    const std::string sums = StoredFieldsChecksums(m.fields);
    if (absl::Status s = b.writer.Add(absl::StrCat(key, ".", kStoredFieldsChecksumField), sums); !s.ok()) return s;
  }
  ++r.shard.samples;
  return absl::OkStatus();
}

absl::Status Run::CloseShard(int64_t shard, Building& b) {
  ShardRecord& r = b.record;
  if (absl::Status s = b.writer.Finish(); !s.ok()) return s;
  const fs::path path = dir_.path() / r.shard.name;
  std::error_code ec;
  fs::rename(b.tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", b.tmp.string(), ": ", ec.message()));
  r.shard.bytes = static_cast<int64_t>(fs::file_size(path, ec));
  stored_bytes_.fetch_add(r.shard.bytes);
  absl::StatusOr<std::string> checksum = FileChecksum(path);
  if (!checksum.ok()) return checksum.status();
  r.shard.checksum = *checksum;
  if (absl::Status s = dir_.WriteRecord(r); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  records_[shard] = std::move(r);
  return absl::OkStatus();
}

absl::Status Run::MakeShard(int64_t shard) {
  Building b;
  if (absl::Status s = OpenShard(shard, &b); !s.ok()) return s;
  for (int64_t i = b.record.begin; i < b.record.end; ++i) {
    if (stop_.load() || Cancelled()) return absl::CancelledError("stopped");
    if (absl::Status s = AddToShard(b, MakeSample(i)); !s.ok()) return s;
  }
  return CloseShard(shard, b);
}

int64_t Run::RemoteBatchSize() const {
  int64_t batch = std::clamp<int64_t>(config_.batch_size, 1, shard_samples_);
  if (shard_samples_ >= size_) return batch;  // one shard: any batch size
  while (shard_samples_ % batch != 0) --batch;
  if (batch < std::min(config_.batch_size, shard_samples_)) {
    LOG(WARNING) << "requesting " << batch << " samples per batch, not " << config_.batch_size << ": batches must tile "
                 << "the " << shard_samples_ << "-sample shards this run records (--shard-samples, or an interrupted "
                 << "run's)";
  }
  return batch;
}

absl::Status Run::RunRemote(const ProgressFn& progress) {
  start_ = absl::Now();
  done_at_start_ = done_.load();
  const int64_t batch = RemoteBatchSize();
  std::vector<int64_t> batches;
  for (int64_t k : pending_) {
    const int64_t begin = k * shard_samples_, end = std::min(size_, begin + shard_samples_);
    for (int64_t b = begin / batch; b * batch < end; ++b) batches.push_back(b);
  }
  std::optional<Building> building;
  int64_t shard = -1, expected = -1;
  size_t next_pending = 0;  // the pending shards are made in order, each once
  absl::Time reported = absl::Now();
  auto sink = [&](MadeSample m) -> absl::Status {
    if (!building) {
      if (next_pending == pending_.size() || m.index / shard_samples_ != pending_[next_pending]) {
        return absl::DataLossError(
            absl::StrCat("the servers delivered sample ", m.index, ", which is in no shard due next"));
      }
      shard = pending_[next_pending++];
      expected = shard * shard_samples_;
      if (absl::Status s = OpenShard(shard, &building.emplace()); !s.ok()) return s;
    }
    if (m.index != expected) {  // exactly once and in order, or the shard would be wrong
      return absl::DataLossError(absl::StrCat("the servers delivered sample ", m.index, " where ", expected,
                                              " was due; nothing of ", ShardName(shard), " was kept"));
    }
    ++expected;
    if (absl::Status s = AddToShard(*building, m); !s.ok()) return s;
    if (expected == building->record.end) {
      if (absl::Status s = CloseShard(shard, *building); !s.ok()) return s;
      building.reset();
    }
    if (absl::Now() - reported >= config_.progress_every) {
      reported = absl::Now();
      Report(progress, false);
    }
    return absl::OkStatus();
  };
  absl::Status status;
  try {
    status = remote_->Make(batch, batches, sink, config_.cancel);
  } catch (const std::exception& e) {  // e.g. bad_alloc: the run's error, never std::terminate
    status = absl::InternalError(absl::StrCat("receiving samples: ", e.what()));
  }
  if (Cancelled()) return CancelledError();
  if (!status.ok()) return status;
  if (building || next_pending != pending_.size()) {
    return absl::DataLossError(absl::StrCat("the servers ended before ",
                                            ShardName(building ? shard : pending_[next_pending]),
                                            " was complete; rerun the same command to finish"));
  }
  Report(progress, true);
  return absl::OkStatus();
}

absl::Status Run::CancelledError() const {
  const int64_t made =
      std::count_if(records_.begin(), records_.end(), [](const ShardRecord& r) { return !r.shard.name.empty(); });
  return absl::CancelledError(absl::StrCat("interrupted with ", made, " of ", shards_, " shards made (kept in ",
                                           dir_.path().string(), "); rerun the same command to finish"));
}

void Run::Work() {
  for (size_t i = next_.fetch_add(1); i < pending_.size() && !stop_.load(); i = next_.fetch_add(1)) {
    absl::Status s;
    try {
      s = MakeShard(pending_[i]);
    } catch (const std::exception& e) {  // e.g. bad_alloc: the run's error, never std::terminate
      s = absl::InternalError(absl::StrCat("making ", ShardName(pending_[i]), ": ", e.what()));
    }
    if (!s.ok() && !absl::IsCancelled(s)) {
      stop_.store(true);
      absl::MutexLock lock(&mu_);
      if (error_.ok()) error_ = s;
    }
  }
  absl::MutexLock lock(&mu_);
  --running_;
}

void Run::Report(const ProgressFn& progress, bool final) {
  if (!progress) return;
  MaterializeProgress p;
  p.total = size_;
  p.done = done_.load();
  p.failed = failed_.load();
  p.stored_bytes = stored_bytes_.load();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  p.samples_per_second = seconds > 0 ? static_cast<double>(p.done - done_at_start_) / seconds : 0;
  if (final) {
    p.eta = absl::ZeroDuration();
  } else if (p.samples_per_second > 0) {
    p.eta = absl::Seconds(static_cast<double>(p.total - p.done) / p.samples_per_second);
  }
  progress(p);
}

absl::StatusOr<Manifest> Run::WriteManifest() {
  Manifest m;
  m.source_dataset = config_.dataset;
  m.source_fingerprint = fingerprint_;
  m.source_samples = size_;
  m.prefix = prefix_.ops();
  m.format = config_.format;
  m.class_names = class_names_;
  m.created = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  m.stores_fields = true;
  std::set<std::string> fields;
  for (const ShardRecord& r : records_) {
    m.shards.push_back(r.shard);
    m.samples += r.shard.samples;
    m.failed.insert(m.failed.end(), r.failed.begin(), r.failed.end());
    fields.insert(r.fields.begin(), r.fields.end());
  }
  m.fields.assign(fields.begin(), fields.end());
  if (absl::Status s = dir_.WriteManifest(m); !s.ok()) return s;
  return m;
}

void Run::LoadRecords() {
  shards_ = (size_ + shard_samples_ - 1) / shard_samples_;
  records_.resize(static_cast<size_t>(shards_));
  for (int64_t k = 0; k < shards_; ++k) {
    const int64_t begin = k * shard_samples_, end = std::min(size_, begin + shard_samples_);
    if (std::optional<ShardRecord> r = dir_.LoadRecord(ShardName(k), begin, end)) {
      done_.fetch_add(r->end - r->begin);
      failed_.fetch_add(static_cast<int64_t>(r->failed.size()));
      stored_bytes_.fetch_add(r->shard.bytes);
      records_[k] = *std::move(r);
      ++resumed_;
    } else {
      pending_.push_back(k);
    }
  }
}

absl::Status Run::RunWorkers(const ProgressFn& progress) {
  start_ = absl::Now();
  done_at_start_ = done_.load();
  const int workers = static_cast<int>(std::min<size_t>(config_.workers, std::max<size_t>(1, pending_.size())));
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    running_ = workers;
  }
  for (int w = 0; w < workers; ++w) threads.emplace_back([this] { Work(); });
  mu_.Lock();
  while (running_ > 0) {
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](int* n) { return *n == 0; }, &running_),
                         config_.progress_every);
    if (running_ == 0) break;  // the final report follows
    mu_.Unlock();
    Report(progress, false);
    mu_.Lock();
  }
  absl::Status error = error_;
  mu_.Unlock();
  for (std::thread& t : threads) t.join();
  if (!error.ok()) return error;
  if (Cancelled()) return CancelledError();
  if (const int64_t dropped = dropped_fields_.load(); dropped > 0) {
    LOG(WARNING) << dropped << " source members were left out: their names (" << config_.format.Field()
                 << ", cls, xxh3, *.xxh3) are the stored dataset's own; rename them in the source to keep them";
  }
  Report(progress, true);
  return absl::OkStatus();
}

absl::StatusOr<MaterializeReport> Run::Finish(Manifest manifest, int64_t made, absl::Time began) {
  if (absl::Status s = dir_.Place(); !s.ok()) return s;
  dir_.Unlock();
  MaterializeReport report;
  report.manifest = std::move(manifest);
  report.out = dir_.out();
  report.shards_made = made;
  report.shards_resumed = static_cast<int64_t>(report.manifest.shards.size()) - made;
  for (const auto& s : report.manifest.shards) report.stored_bytes += s.bytes;
  report.took = absl::Now() - began;
  return report;
}

absl::StatusOr<MaterializeReport> Run::Go(const ProgressFn& progress) {
  const absl::Time began = absl::Now();
  std::error_code ec;
  fs::create_directories(dir_.out().parent_path(), ec);
  if (absl::Status s = dir_.Lock(); !s.ok()) return s;
  if (fs::exists(dir_.out(), ec) && !config_.overwrite) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir_.out().string(),
                     " already exists; pass --overwrite to replace it (it is replaced only once the new output is "
                     "complete)"));
  }
  if (std::optional<Manifest> finished = FinishedManifest()) {  // only the placing was left
    return Finish(*std::move(finished), 0, began);
  }
  if (absl::Status s = PrepareWorkDir(); !s.ok()) return s;
  LoadRecords();
  LOG(INFO) << "materialising '" << config_.dataset << "' (" << size_ << " samples) with prefix '"
            << PipelineToText(prefix_.ops()) << "' as " << config_.format.Name() << " into " << dir_.out().string()
            << ": " << shards_ << " shards of " << shard_samples_ << " samples, " << resumed_ << " already made, "
            << (remote_ ? "on the servers" : absl::StrCat(config_.workers, " workers"));
  if (absl::Status s = remote_ ? RunRemote(progress) : RunWorkers(progress); !s.ok()) return s;
  int64_t stored = 0;
  for (const ShardRecord& r : records_) stored += r.shard.samples;
  if (stored == 0) {
    dir_.Remove();
    const Manifest::Failed& first = records_.front().failed.front();
    return absl::DataLossError(absl::StrCat("no sample of '", config_.dataset, "' could be made (", done_.load(),
                                            " failed; the first, ", first.path, ": ", first.reason,
                                            "); nothing was written"));
  }
  absl::StatusOr<Manifest> manifest = WriteManifest();
  if (!manifest.ok()) return manifest.status();
  return Finish(*std::move(manifest), static_cast<int64_t>(pending_.size()), began);
}

}  // namespace

std::string ShardName(int64_t shard) { return absl::StrFormat("shard-%06d.tar", shard); }

absl::StatusOr<MaterializeReport> Materialize(const MaterializeConfig& config, const ProgressFn& progress) {
  if (config.out.empty()) return absl::InvalidArgumentError("--out is empty; name the output directory");
  if (config.workers < 1)
    return absl::InvalidArgumentError(absl::StrCat("--local-workers = ", config.workers, "; need >= 1"));
  absl::StatusOr<Pipeline> prefix = Pipeline::CreatePrefix(config.prefix);
  if (!prefix.ok()) return absl::InvalidArgumentError(absl::StrCat("--prefix: ", prefix.status().message()));
  if (prefix->normalizes() && config.format.encoding != StoredEncoding::kRaw) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prefix ends in normalize, so samples are float32 pixels, "
                     "which are stored raw only; --format is ",
                     config.format.EncodingText()));
  }
  if (config.remote) {
    if (config.sample != 0) return absl::InvalidArgumentError("a sample of the dataset is made by local workers only");
    if (config.batch_size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--batch-size = ", config.batch_size, "; need >= 1"));
    }
    absl::StatusOr<std::unique_ptr<RemoteMaker>> remote = config.remote(config.dataset, prefix->ops(), config.format);
    if (!remote.ok()) return remote.status();
    if ((*remote)->size() < 1) {
      return absl::FailedPreconditionError(absl::StrCat("dataset '", config.dataset, "' has no samples"));
    }
    Run run(config, nullptr, *std::move(remote), *std::move(prefix));
    return run.Go(progress);
  }
  CatalogOptions options;
  options.max_file_bytes = config.max_file_bytes;
  options.scan_threads = 1;
  options.fetch = config.fetch;
  options.streamed = config.streamed;
  DatasetCatalog catalog(config.data_root, options);
  SourceOrError source = catalog.Open(config.dataset);
  if (!source.ok()) return source.status();
  if ((*source)->stored() != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset '", config.dataset, "' is already materialised; materialise its source instead"));
  }
  Run run(config, EvenSample(*std::move(source), config.sample), nullptr, *std::move(prefix));
  return run.Go(progress);
}

}  // namespace stoker
