#include "server/batch_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rng.h"
#include "glog/logging.h"
#include "server/image_decoder.h"

namespace stoker {
namespace {

int64_t Nanos(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }
double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

}  // namespace

// One batch being produced. Shared by its sample tasks; the last one to
// finish completes it.
struct BatchSession::Job {
  v1::BatchHeader header;
  std::vector<std::string> chunks;  // written by the sample tasks
  std::vector<std::shared_ptr<const std::string>> shared_chunks;  // a cache hit
  DoneCallback done;
  absl::Time arrived;
  std::atomic<int64_t> remaining{0};
  std::atomic<bool> started{false};
  std::atomic<int64_t> read_ns{0}, decode_ns{0}, augment_ns{0}, assemble_ns{0};
  absl::Mutex mu;
  std::vector<v1::FailedSample> failed ABSL_GUARDED_BY(mu);

  uint8_t* Slot(int64_t slot, int64_t spc, int64_t sample_bytes) {
    return reinterpret_cast<uint8_t*>(chunks[slot / spc].data()) + (slot % spc) * sample_bytes;
  }
};

BatchSession::BatchSession(v1::SessionConfig config, std::shared_ptr<const ImageFolderIndex> index,
                           Pipeline pipeline, WorkerPool* pool, ServerMetrics* metrics,
                           int64_t chunk_bytes)
    : config_(std::move(config)),
      index_(std::move(index)),
      pipeline_(std::move(pipeline)),
      pool_(pool),
      metrics_(metrics),
      samples_per_chunk_(std::max<int64_t>(1, chunk_bytes / pipeline_.sample_bytes())) {}

absl::Status BatchSession::Submit(const v1::BatchRequest& request, DoneCallback done) {
  const int64_t n = request.sample_indices_size();
  if (n < 1 || n > config_.batch_size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", request.batch_index(), ": ", n,
                                                   " sample_indices; allowed 1..batch_size (",
                                                   config_.batch_size(), ")"));
  }
  if (request.epoch() < 0 || request.batch_index() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("epoch = ", request.epoch(), ", batch_index = ",
                                                   request.batch_index(), "; both must be >= 0"));
  }
  for (int64_t idx : request.sample_indices()) {
    if (idx < 0 || idx >= index_->size()) {
      return absl::InvalidArgumentError(absl::StrCat("batch ", request.batch_index(), ": sample index ", idx,
                                                     " out of range 0..", index_->size() - 1));
    }
  }
  auto job = std::make_shared<Job>();
  job->done = std::move(done);
  job->arrived = absl::Now();
  v1::BatchHeader& h = job->header;
  h.set_epoch(request.epoch());
  h.set_batch_index(request.batch_index());
  *h.mutable_sample_indices() = request.sample_indices();
  for (int64_t idx : request.sample_indices()) h.add_labels(index_->samples()[idx].label);
  h.add_shape(n);
  for (int64_t d : pipeline_.SampleShape()) h.add_shape(d);
  h.set_dtype(v1::UINT8);
  h.set_layout(pipeline_.layout());
  h.set_total_bytes(n * pipeline_.sample_bytes());
  metrics_->inflight_batches->Increment();
  if (TryServeFromCache(job)) return absl::OkStatus();

  for (int64_t first = 0; first < n; first += samples_per_chunk_) {
    job->chunks.emplace_back(std::min(samples_per_chunk_, n - first) * pipeline_.sample_bytes(), '\0');
  }
  job->remaining.store(n);
  metrics_->queued_samples->Increment(static_cast<double>(n));
  for (int64_t slot = 0; slot < n; ++slot) {
    pool_->Schedule([this, job, slot] { RunSample(job, slot); });
  }
  return absl::OkStatus();
}

bool BatchSession::TryServeFromCache(const std::shared_ptr<Job>& job) {
  if (config_.cache_mode() != v1::CACHE_BATCH) return false;
  {
    absl::MutexLock lock(&mu_);
    if (cached_samples_ != job->header.sample_indices_size()) return false;
    job->shared_chunks = cached_chunks_;
  }
  // Runs on the worker pool like a real batch, so callers see one threading model.
  pool_->Schedule([this, job] { Complete(job); });
  return true;
}

void BatchSession::RunSample(const std::shared_ptr<Job>& job, int64_t slot) {
  metrics_->queued_samples->Decrement();
  if (!job->started.exchange(true)) {
    const absl::Duration queued = absl::Now() - job->arrived;
    job->header.mutable_stage_times()->set_queue_seconds(absl::ToDoubleSeconds(queued));
  }
  if (!cancelled_.load()) {
    const int64_t index = job->header.sample_indices(slot);
    const SampleRef& ref = index_->samples()[index];
    absl::Time t0 = absl::Now();
    absl::StatusOr<std::string> bytes = ReadFileBytes(index_->dir() / ref.path);
    absl::Time t1 = absl::Now();
    absl::Status status = bytes.status();
    if (bytes.ok()) {
      metrics_->read_bytes->Increment(static_cast<double>(bytes->size()));
      absl::StatusOr<cv::Mat> image = DecodeImage(*bytes);
      absl::Time t2 = absl::Now();
      job->decode_ns += Nanos(t2 - t1);
      metrics_->decode_seconds->Observe(absl::ToDoubleSeconds(t2 - t1));
      status = image.status();
      if (image.ok()) {
        Rng rng = Rng::ForSample(config_.seed(), job->header.epoch(), index);
        cv::Mat out = pipeline_.Apply(*std::move(image), rng);
        absl::Time t3 = absl::Now();
        pipeline_.Store(out, job->Slot(slot, samples_per_chunk_, pipeline_.sample_bytes()));
        absl::Time t4 = absl::Now();
        job->augment_ns += Nanos(t3 - t2);
        job->assemble_ns += Nanos(t4 - t3);
        metrics_->augment_seconds->Observe(absl::ToDoubleSeconds(t3 - t2));
      }
    }
    job->read_ns += Nanos(t1 - t0);
    metrics_->read_seconds->Observe(absl::ToDoubleSeconds(t1 - t0));
    metrics_->samples->Increment();
    if (!status.ok()) {
      // The slot stays zeros; the batch says which sample failed and why.
      LOG(WARNING) << "sample " << index << " (" << (index_->dir() / ref.path).string()
                   << ") failed: " << status.message();
      metrics_->samples_failed->Increment();
      absl::MutexLock lock(&job->mu);
      v1::FailedSample& f = job->failed.emplace_back();
      f.set_sample_index(index);
      f.set_path(ref.path);
      f.set_reason(std::string(status.message()));
    }
  }
  if (job->remaining.fetch_sub(1) == 1) Complete(job);
}

void BatchSession::Complete(const std::shared_ptr<Job>& job) {
  v1::StageTimes& t = *job->header.mutable_stage_times();
  t.set_read_seconds(Seconds(job->read_ns));
  t.set_decode_seconds(Seconds(job->decode_ns));
  t.set_augment_seconds(Seconds(job->augment_ns));
  t.set_assemble_seconds(Seconds(job->assemble_ns));
  metrics_->assemble_seconds->Observe(Seconds(job->assemble_ns));
  if (job->started.load()) metrics_->queue_seconds->Observe(t.queue_seconds());
  {
    absl::MutexLock lock(&job->mu);
    for (v1::FailedSample& f : job->failed) *job->header.add_failed_samples() = std::move(f);
  }
  for (std::string& chunk : job->chunks) {
    job->shared_chunks.push_back(std::make_shared<const std::string>(std::move(chunk)));
  }
  if (config_.cache_mode() == v1::CACHE_BATCH) {
    absl::MutexLock lock(&mu_);
    if (cached_samples_ == 0) {
      cached_chunks_ = job->shared_chunks;
      cached_samples_ = job->header.sample_indices_size();
    }
  }
  FinishedBatch batch{std::move(job->header), std::move(job->shared_chunks), absl::Now()};
  job->done(std::move(batch));
}

DataServiceCore::DataServiceCore(CoreConfig config, ServerMetrics* metrics)
    : config_(std::move(config)), metrics_(metrics), catalog_(config_.data_root), pool_(config_.workers) {
  metrics_->workers->Set(pool_.num_threads());
}

absl::StatusOr<DataServiceCore::Prepared> DataServiceCore::Prepare(const v1::SessionConfig& config) {
  absl::StatusOr<Pipeline> pipeline = Pipeline::Create(config);
  if (!pipeline.ok()) {
    metrics_->rejected_sessions->Increment();
    return pipeline.status();
  }
  absl::StatusOr<std::shared_ptr<const ImageFolderIndex>> index = catalog_.Open(config.dataset());
  if (!index.ok()) {
    metrics_->rejected_sessions->Increment();
    return index.status();
  }
  return Prepared{*std::move(pipeline), *std::move(index)};
}

absl::StatusOr<v1::OpenSessionResponse> DataServiceCore::OpenSession(const v1::SessionConfig& config) {
  absl::StatusOr<Prepared> prepared = Prepare(config);
  if (!prepared.ok()) return prepared.status();
  v1::OpenSessionResponse response;
  response.set_num_samples(prepared->index->size());
  for (const std::string& name : prepared->index->class_names()) response.add_class_names(name);
  for (int64_t d : prepared->pipeline.SampleShape()) response.add_sample_shape(d);
  response.set_sample_bytes(prepared->pipeline.sample_bytes());
  return response;
}

absl::StatusOr<std::unique_ptr<BatchSession>> DataServiceCore::StartSession(const v1::SessionConfig& config) {
  absl::StatusOr<Prepared> prepared = Prepare(config);
  if (!prepared.ok()) return prepared.status();
  return std::make_unique<BatchSession>(config, std::move(prepared->index), std::move(prepared->pipeline),
                                        &pool_, metrics_, config_.chunk_bytes);
}

}  // namespace stoker
