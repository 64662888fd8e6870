#include "dataplane/sessions/batch_session.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/await.h"
#include "common/epoch_plan.h"
#include "common/field_layout.h"
#include "common/field_spec.h"
#include "common/job_name.h"
#include "common/rng.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/fields/sample_fields.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sample/sample_watch.h"
#include "dataplane/sample/stored_sample.h"
#include "dataplane/sessions/batch_session_internal.h"
#include "dataplane/sessions/store_output.h"
#include "glog/logging.h"

namespace stoker {

using batch_session_internal::FailsTheBatch;
using batch_session_internal::ImageExtensions;
using batch_session_internal::IsOutOfMemory;
using batch_session_internal::Nanos;
using batch_session_internal::OutOfMemory;
using batch_session_internal::ProcessingError;
using batch_session_internal::ReadFailureReason;
using batch_session_internal::Seconds;

BatchSession::BatchSession(v1::SessionConfig config, std::shared_ptr<const SampleSource> source, Pipeline pipeline,
                           WorkerPool* pool, ServerMetrics* metrics, FailureLog* failure_log, MemoryBudget* budget,
                           const CoreConfig& core, std::optional<StoredFormat> store, SessionPlace place)
    : config_(std::move(config)),
      source_(std::move(source)),
      pipeline_(std::move(pipeline)),
      pool_(pool),
      metrics_(metrics),
      failure_log_(failure_log),
      max_pixels_(core.max_pixels),
      max_media_seconds_(core.max_media_seconds),
      max_sample_cpu_(core.max_sample_cpu),
      max_video_frames_(core.max_video_frames),
      video_decoder_threads_(core.video_decoder_threads),
      workers_(core.workers),
      sample_delay_(core.sample_delay),
      read_bytes_per_second_(core.test_read_bytes_per_second),
      budget_(budget),
      first_op_(source_->stored() != nullptr ? source_->stored()->prefix.size() : 0),
      store_(std::move(store)),
      place_(std::move(place)),
      cache_key_(place_.cache && !store_ && config_.cache_mode() == v1::CACHE_NONE
                     ? BatchCache::SessionKey(config_, source_->fingerprint()) +
                           (place_.tokenizer ? "|" + place_.tokenizer->version() : std::string())
                     : std::string()),
      job_samples_(&metrics_->JobSamples(config_.job())),
      value_fields_(ValueFields(config_.fields())),
      image_extensions_(ImageExtensions(config_)),
      max_field_bytes_(config_.max_field_bytes() > 0 ? config_.max_field_bytes() : kDefaultMaxFieldBytes),
      target_roles_(TargetRoles(value_fields_, *source_)),
      has_targets_(std::any_of(target_roles_.begin(), target_roles_.end(),
                               [](TargetRole r) { return r != TargetRole::kMember && r != TargetRole::kAudioTrack; })),
      audio_track_field_(static_cast<int>(
          std::find(target_roles_.begin(), target_roles_.end(), TargetRole::kAudioTrack) - target_roles_.begin())),
      target_needs_(NeedsOf(target_roles_)),
      item_shapes_(ItemShapes(value_fields_, source_->keypoints_per_box(), pipeline_.out_height(),
                              pipeline_.out_width(), pipeline_.audio_track_shape())),
      max_sample_field_bytes_(
          MaxSampleFieldBytes(value_fields_, config_, pipeline_.out_height(), pipeline_.out_width())),
      caches_(budget, core.max_cache_bytes_per_session,
              absl::StrCat("session on dataset '", config_.dataset(), "': its cache (",
                           v1::CacheMode_Name(config_.cache_mode()), ")")) {}

BatchSession::~BatchSession() = default;

bool FailureLog::FirstTime(const std::string& where) {
  absl::MutexLock lock(&mu_);
  return seen_.insert(where).second;
}

absl::Status BatchSession::Submit(const v1::BatchRequest& request, DoneCallback done) {
  const int64_t n = request.sample_indices_size();
  if (n < 1 || n > config_.batch_size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", request.batch_index(), ": ", n,
                                                   " sample_indices; allowed 1..batch_size (", config_.batch_size(),
                                                   ")"));
  }
  if (request.epoch() < 0 || request.batch_index() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch = ", request.epoch(), ", batch_index = ", request.batch_index(), "; both must be >= 0"));
  }
  for (int64_t idx : request.sample_indices()) {
    if (idx < 0 || idx >= source_->size()) {
      return absl::InvalidArgumentError(absl::StrCat("batch ", request.batch_index(), ": sample index ", idx,
                                                     " out of range 0..", source_->size() - 1));
    }
  }
  auto job = std::make_shared<Job>();
  job->done = std::move(done);
  job->arrived = absl::Now();
  v1::BatchHeader& h = job->header;
  h.set_epoch(request.epoch());
  h.set_batch_index(request.batch_index());
  *h.mutable_sample_indices() = request.sample_indices();
  for (int64_t idx : request.sample_indices()) h.add_labels(source_->label(idx));
  h.add_shape(n);
  if (!value_fields_.empty()) job->field_values.resize(static_cast<size_t>(n));
  metrics_->inflight_batches->Increment();
  if (store_) {  // sizes and total_bytes once made
    job->stored.resize(static_cast<size_t>(n));
  } else {
    for (int64_t d : pipeline_.SampleShape()) h.add_shape(d);
    h.set_dtype(pipeline_.dtype());
    h.set_layout(pipeline_.layout());
    h.set_total_bytes(n * pipeline_.sample_bytes());
    if (TryServeFromCache(job)) return absl::OkStatus();
    job->bytes = n * pipeline_.sample_bytes();
    if (TryShared(job, request)) return absl::OkStatus();
  }
  Make(job);
  return absl::OkStatus();
}

void BatchSession::Make(const std::shared_ptr<Job>& job) {
  const int64_t n = job->header.sample_indices_size();
  // Shards left in a store start coming now, before a worker needs them.
  source_->WillRead(job->header.sample_indices().data(), n);
  job->remaining.store(n);
  metrics_->queued_samples->Increment(static_cast<double>(n));
  for (int64_t slot = 0; slot < n; ++slot) {
    pool_->Schedule(place_.share.get(), [this, job, slot] { RunSample(job, slot); });
  }
}

bool BatchSession::TryShared(const std::shared_ptr<Job>& job, const v1::BatchRequest& request) {
  if (cache_key_.empty()) return false;
  job->cache_key = BatchCache::BatchKey(cache_key_, request);
  FinishedBatch hit;
  // Called by the maker's worker once its batch is done (or given up).
  auto waiter = [this, job](const FinishedBatch* made) {
    if (made == nullptr) {  // the maker was cancelled: this session makes it (Complete finishes the key)
      return Make(job);
    }
    FinishedBatch copy = *made;  // the buffer is shared, never written again
    copy.ready_time = absl::Now();
    job->done(std::move(copy));
  };
  switch (place_.cache->Lookup(job->cache_key, &hit, waiter)) {
    case BatchCache::Outcome::kHit:
      // On the worker pool like a made batch (one threading model); a
      // moment's work, charged to this job's share.
      pool_->Schedule(place_.share.get(), [job, hit = std::move(hit)]() mutable {
        hit.ready_time = absl::Now();
        job->done(std::move(hit));
      });
      return true;
    case BatchCache::Outcome::kJoined: return true;
    case BatchCache::Outcome::kMake: return false;  // Complete hands it to the cache
  }
  return false;
}

bool BatchSession::TryServeFromCache(const std::shared_ptr<Job>& job) {
  if (config_.cache_mode() != v1::CACHE_BATCH) return false;
  {
    std::shared_ptr<const std::string> kept = caches_.FindBatch(job->header.sample_indices_size());
    if (kept == nullptr) return false;
    job->data = std::const_pointer_cast<std::string>(kept);  // shared, never written again
  }
  // Runs on the worker pool like a real batch, so callers see one threading
  // model; charged to this job's share, as a shared-cache hit is.
  pool_->Schedule(place_.share.get(), [this, job] { Complete(job); });
  return true;
}

int64_t BatchSession::BatchBytes(const v1::BatchRequest& request) const {
  const int64_t n = std::min<int64_t>(request.sample_indices_size(), config_.batch_size());
  return n * (store_ ? EstimatedStoredBytes(pipeline_) : pipeline_.sample_bytes());
}

// A batch that failed for a reason other than its data (memory, a timer):
// the code is kept (RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED: the client asks
// another server), the message names the batch, the sample and the limit.
absl::Status BatchSession::BatchFailure(const Job& job, int64_t index, const absl::Status& status) const {
  return absl::Status(status.code(), absl::StrCat("batch ", job.header.batch_index(), ", sample ", index, " (",
                                                  source_->Describe(index), "): ", status.message()));
}

void BatchSession::Abandon(Job& job, absl::Status error) {
  absl::MutexLock lock(&job.mu);
  if (job.error.ok()) job.error = std::move(error);
  job.abandoned.store(true);
}

void BatchSession::RunSample(const std::shared_ptr<Job>& job, int64_t slot) {
  const absl::Time task_start = absl::Now();
  metrics_->queued_samples->Decrement();
  // Allocated when work starts, not at Submit: queued requests hold no memory.
  // An allocation the process cannot make (an address-space or data limit
  // the budget did not foresee) fails this batch, never the server.
  if (!store_) {
    std::call_once(job->allocated, [&] {
      try {
        job->data = std::make_shared<std::string>(static_cast<size_t>(job->bytes), '\0');
      } catch (const std::bad_alloc&) {
        job->data.reset();
        absl::MutexLock lock(&job->mu);
        job->error = OutOfMemory(job->header.batch_index(), job->bytes, budget_->limit());
      }
    });
  }
  if (!store_ && !job->data) {  // the buffer could not be made: nothing to produce into
    if (job->remaining.fetch_sub(1) == 1) Complete(job);
    return;
  }
  if (!job->started.exchange(true)) {
    const absl::Duration queued = absl::Now() - job->arrived;
    job->header.mutable_stage_times()->set_queue_seconds(absl::ToDoubleSeconds(queued));
  }
  // The sample stops at the next check when the stream ends or its CPU time
  // is spent (the replacements included: one budget for the slot).
  const SampleWatch watch(&cancelled_, max_sample_cpu_, &job->abandoned);
  if (!cancelled_.load() && !job->abandoned.load()) {
    const int64_t epoch = job->header.epoch(), index = job->header.sample_indices(slot);
    uint8_t* dst = store_ ? nullptr : job->Slot(slot, pipeline_.sample_bytes());
    std::vector<std::string>* fields = value_fields_.empty() ? nullptr : &job->field_values[static_cast<size_t>(slot)];
    absl::Status status = store_ ? ProduceStored(index, &job->stored[static_cast<size_t>(slot)], *job)
                                 : ProduceSample(epoch, index, dst, fields, *job);
    if (cancelled_.load() || (job->abandoned.load() && status.code() == absl::StatusCode::kCancelled)) {
      // The stream is gone, or the batch failed already: nothing is sent
      // for this sample, nothing is blamed.
    } else if (FailsTheBatch(status)) {
      // Not the sample's fault (memory, or a timer that depends on load):
      // no replacement, the batch fails and another server may make it.
      Abandon(*job, BatchFailure(*job, index, status));
    } else if (!status.ok()) {
      v1::FailedSample failed;
      failed.set_sample_index(index);
      failed.set_path(source_->Describe(index));
      failed.set_reason(std::string(status.message()));
      failed.set_replaced_by(-1);
      // Materialising: a failed sample is left out and listed, never replaced.
      const bool left_out = store_ && config_.bad_sample_policy() == v1::SKIP;
      if (config_.bad_sample_policy() == v1::SKIP && !store_) {
        int64_t replacement = -1;
        absl::Status replaced = Replace(epoch, index, dst, fields, *job, &replacement);
        if (FailsTheBatch(replaced)) Abandon(*job, BatchFailure(*job, index, replaced));  // a timer: the batch's
        if (replaced.ok()) {
          failed.set_replaced_by(replacement);
          job->header.set_labels(static_cast<int>(slot), source_->label(replacement));
        } else {
          status = replaced;
        }
      }
      const bool unrecovered = failed.replaced_by() < 0 && !left_out;
      {
        absl::MutexLock lock(&job->mu);
        job->failed.push_back(std::move(failed));
      }
      if (unrecovered) {
        Abandon(*job, absl::DataLossError(
                          absl::StrCat("sample ", index, " (", source_->Describe(index), "): ", status.message())));
      }
    }
  }
  if (!cancelled_.load() && !value_fields_.empty()) ChargeFields(*job, job->field_values[static_cast<size_t>(slot)]);
  if (!cancelled_.load()) {
    job->worker_ns += Nanos(absl::Now() - task_start);
    ++job->produced;
    job_samples_->Increment();
  }
  if (job->remaining.fetch_sub(1) == 1) Complete(job);
}

void BatchSession::ChargeFields(Job& job, const std::vector<std::string>& values) {
  const int64_t bytes = SampleFieldBytes(values);
  if (bytes == 0) return;
  if (budget_->TryAcquire(bytes)) {
    job.field_charge += bytes;
    return;
  }
  absl::MutexLock lock(&job.mu);
  if (job.error.ok()) {
    job.error =
        absl::ResourceExhaustedError(absl::StrCat("batch ", job.header.batch_index(), ": its fields need ", bytes,
                                                  " more bytes and the server's budget for "
                                                  "batches in flight (",
                                                  budget_->limit(),
                                                  " bytes, --max-inflight-bytes) is used up; retry later or on "
                                                  "another server"));
  }
}

absl::Status BatchSession::ProduceSample(int64_t epoch, int64_t index, uint8_t* dst, std::vector<std::string>* fields,
                                         Job& job) {
  if (sample_delay_ > absl::ZeroDuration()) absl::SleepFor(sample_delay_);
  const absl::Time t0 = absl::Now();
  if (fields == nullptr) {  // an (images, labels) batch: a label that cannot be read is a bad sample
    if (absl::Status label = source_->LabelStatus(index); !label.ok()) return Failed(index, label, "bad_field");
  }
  SampleTargets targets;  // moved by the geometric ops with the pixels
  GeometrySink sink;
  GeometrySink* geometry = nullptr;
  if (fields != nullptr) {  // before the image: a sample without its fields is not decoded
    absl::Status read = Guarded(index, [&] {
      absl::Status s = ReadSampleFields(*source_, index, value_fields_, target_roles_, max_field_bytes_, fields,
                                        place_.tokenizer.get(), config_.max_tokens());
      if (!s.ok() || !has_targets_) return s;
      TargetNeeds needs = target_needs_;
      needs.max_pixels = max_pixels_;
      return ReadSampleTargets(*source_, index, value_fields_, target_roles_, needs, &targets);
    });
    if (!read.ok()) {
      job.read_ns += Nanos(absl::Now() - t0);
      return Failed(index, read, ReadFailureReason(read));
    }
  }
  if (has_targets_ && fields != nullptr) {
    sink.targets = &targets;
    sink.options.min_visibility = config_.box_min_visibility();
    geometry = &sink;
  }
  const v1::CacheMode mode = config_.cache_mode();
  if (mode == v1::CACHE_DECODED) return ProduceFromDecodedCache(epoch, index, dst, job);
  std::shared_ptr<const std::string> cached;
  if (mode == v1::CACHE_RAW) cached = caches_.FindRaw(index);
  absl::StatusOr<std::string> bytes = cached ? absl::StatusOr<std::string>(std::string()) : ReadSample(index);
  if (!cached && bytes.ok() && read_bytes_per_second_ > 0) {  // test-only slow storage
    absl::SleepFor(absl::Seconds(static_cast<double>(bytes->size()) / static_cast<double>(read_bytes_per_second_)));
  }
  if (mode == v1::CACHE_RAW && !cached && bytes.ok()) {
    metrics_->read_bytes->Increment(static_cast<double>(bytes->size()));
    cached = std::make_shared<const std::string>(*std::move(bytes));
    caches_.KeepRaw(index, cached);
  }
  const absl::Time t1 = absl::Now();
  job.read_ns += Nanos(t1 - t0);
  metrics_->read_seconds->Observe(absl::ToDoubleSeconds(t1 - t0));
  metrics_->samples->Increment();
  absl::Status status = bytes.status();
  std::string reason = ReadFailureReason(status);
  if (bytes.ok()) {
    const std::string& encoded = cached ? *cached : *bytes;
    if (!cached) metrics_->read_bytes->Increment(static_cast<double>(encoded.size()));
    Rng rng = Rng::ForSample(config_.seed(), epoch, index);
    SampleTimes times;
    UserOpIo io;  // user ops see the value fields (never targets: refused with them)
    io.max_field_bytes = max_field_bytes_;
    if (fields != nullptr && pipeline_.has_user_ops()) {
      for (size_t f = 0; f < value_fields_.size(); ++f) {
        if (f < target_roles_.size() && target_roles_[f] != TargetRole::kMember) continue;
        io.fields.push_back({value_fields_[f].name(), value_fields_[f].kind(), &(*fields)[f]});
      }
    }
    try {
      if (source_->stored() == nullptr) {  // encoded images: decoded straight from the (cached) bytes
        if (pipeline_.audio() != nullptr || pipeline_.video()) {
          status = ProduceMedia(index, encoded, rng, dst, &times, fields);
        } else {
          status = pipeline_.Produce(encoded, rng, max_pixels_, dst, &times, 0, geometry, &io);
        }
        if (status.ok() && geometry != nullptr) status = sink.status;
        if (status.ok() && geometry != nullptr) {
          EncodeTargets(targets, target_roles_, pipeline_.out_height(), pipeline_.out_width(), fields);
        }
      } else {
        status = ProduceFromBytes(cached ? std::string(encoded) : *std::move(bytes), rng, dst, &times, &io);
      }
    } catch (const std::exception& e) {  // OpenCV throws; never let it reach the worker thread
      status = ProcessingError(e, "processing");
    }
    job.decode_ns += Nanos(times.decode);
    job.augment_ns += Nanos(times.augment);
    job.python_ns += Nanos(times.python);
    metrics_->decode_seconds->Observe(absl::ToDoubleSeconds(times.decode));
    if (status.ok()) metrics_->augment_seconds->Observe(absl::ToDoubleSeconds(times.augment));
    if (times.python > absl::ZeroDuration()) metrics_->python_seconds->Observe(absl::ToDoubleSeconds(times.python));
    reason = DecodeFailureName(DecodeFailureOf(status));
  }
  if (status.ok() && fields != nullptr) {
    status = CheckSampleFieldBytes(value_fields_, *fields, max_sample_field_bytes_, source_->Describe(index));
    if (!status.ok()) reason = DecodeFailureName(DecodeFailure::kTooLarge);
  }
  if (status.ok() || IsOutOfMemory(status)) return status;  // out of memory: the batch's failure, not the sample's
  return Failed(index, status, reason);
}

absl::Status BatchSession::Guarded(int64_t index, const std::function<absl::Status()>& read) const {
  try {
    return read();
  } catch (const std::bad_alloc& e) {  // a field or mask too large to hold: the sample's, never the worker's
    return DecodeError(DecodeFailure::kTooLarge, absl::StrCat(source_->Describe(index), ": ", e.what()));
  } catch (const std::exception& e) {
    return DecodeError(DecodeFailure::kCorrupt, absl::StrCat(source_->Describe(index), ": ", e.what()));
  }
}

absl::Status BatchSession::Failed(int64_t index, const absl::Status& status, const std::string& reason) {
  // Stopped (its stream ended, its batch failed), a timer or memory: no
  // verdict on the sample; RunSample fails the batch where that is due.
  if (cancelled_.load() || status.code() == absl::StatusCode::kCancelled || IsTimerError(status) ||
      IsOutOfMemory(status)) {
    return status;
  }
  metrics_->SamplesFailed(reason).Increment();
  const std::string where = source_->Describe(index);
  if (failure_log_->FirstTime(where)) {
    LOG(WARNING) << "sample " << index << " (" << where << ") in dataset '" << config_.dataset()
                 << "' failed: " << status.message();
  }
  return status;
}

absl::StatusOr<std::string> BatchSession::ReadSample(int64_t index) const {
  try {
    if (!image_extensions_.empty() && source_->has_members() && source_->stored() == nullptr) {
      return source_->ReadField(index, image_extensions_, nullptr);
    }
    return source_->Read(index);
  } catch (const std::exception& e) {  // e.g. bad_alloc: fail the sample or batch, never the worker thread
    if (IsOutOfMemory(e)) return ProcessingError(e, absl::StrCat("reading ", source_->Describe(index)));
    return absl::ResourceExhaustedError(absl::StrCat("reading ", source_->Describe(index), ": ", e.what()));
  }
}

absl::Status BatchSession::ProduceFromDecodedCache(int64_t epoch, int64_t index, uint8_t* dst, Job& job) {
  cv::Mat image = caches_.FindDecoded(index);
  if (image.empty()) {  // a miss: read and decode for real, counted as such
    const absl::Time read_start = absl::Now();
    absl::StatusOr<std::string> bytes = ReadSample(index);
    if (!bytes.ok()) return bytes.status();
    metrics_->read_bytes->Increment(static_cast<double>(bytes->size()));
    const absl::Time decode_start = absl::Now();
    job.read_ns += Nanos(decode_start - read_start);
    absl::StatusOr<cv::Mat> decoded;
    try {
      decoded = DecodeWhole(*bytes);
    } catch (const std::exception& e) {
      return ProcessingError(e, "decoding");
    }
    if (!decoded.ok()) return decoded.status();
    const absl::Duration decode = absl::Now() - decode_start;
    job.decode_ns += Nanos(decode);
    metrics_->decode_seconds->Observe(absl::ToDoubleSeconds(decode));
    image = *std::move(decoded);
    caches_.KeepDecoded(index, image);
  }
  const absl::Time t0 = absl::Now();
  Rng rng = Rng::ForSample(config_.seed(), epoch, index);
  UserOpIo io;
  try {
    absl::StatusOr<cv::Mat> applied = pipeline_.Apply(image.clone(), rng, first_op_, max_pixels_, nullptr, &io);
    if (!applied.ok()) return applied.status();
    if (absl::Status stored = pipeline_.Store(*applied, dst); !stored.ok()) return stored;
  } catch (const std::exception& e) {
    return ProcessingError(e, "processing");
  }
  const absl::Duration augment = absl::Now() - t0 - io.python_time;
  job.augment_ns += Nanos(augment);
  job.python_ns += Nanos(io.python_time);
  metrics_->augment_seconds->Observe(absl::ToDoubleSeconds(augment));
  metrics_->samples->Increment();
  return absl::OkStatus();
}

void BatchSession::Complete(const std::shared_ptr<Job>& job) {
  v1::StageTimes& t = *job->header.mutable_stage_times();
  t.set_read_seconds(Seconds(job->read_ns));
  t.set_decode_seconds(Seconds(job->decode_ns));
  t.set_augment_seconds(Seconds(job->augment_ns));
  t.set_python_seconds(Seconds(job->python_ns));
  t.set_assemble_seconds(Seconds(job->assemble_ns));
  t.set_server_seconds(absl::ToDoubleSeconds(absl::Now() - job->arrived));
  if (config_.cache_mode() == v1::CACHE_NONE && job->produced.load() > 0) {
    metrics_->capacity->Add(job->produced.load(), absl::Nanoseconds(job->worker_ns.load()));
  }
  t.set_capacity_images_per_second(metrics_->capacity->ImagesPerSecond());
  metrics_->assemble_seconds->Observe(Seconds(job->assemble_ns));
  if (job->started.load()) metrics_->queue_seconds->Observe(t.queue_seconds());
  {
    absl::MutexLock lock(&job->mu);
    for (v1::FailedSample& f : job->failed) *job->header.add_failed_samples() = std::move(f);
  }
  // Joining stored samples or appending the fields allocates again: a
  // failure there is the batch's too.
  try {
    if (store_) {  // the samples, one after another, and their sizes
      const absl::Time t0 = absl::Now();
      size_t total = 0;
      for (const std::string& sample : job->stored) total += sample.size();
      job->data = std::make_shared<std::string>();
      job->data->reserve(total);
      for (std::string& sample : job->stored) {
        job->header.add_sample_sizes(static_cast<int64_t>(sample.size()));
        job->data->append(sample);
        std::string().swap(sample);
      }
      job->header.set_total_bytes(static_cast<int64_t>(total));
      t.set_assemble_seconds(absl::ToDoubleSeconds(absl::Now() - t0));
      if (static_cast<int64_t>(total) > kMaxBatchBytes) {
        absl::MutexLock lock(&job->mu);
        if (job->error.ok()) {
          job->error = absl::ResourceExhaustedError(absl::StrCat("batch ", job->header.batch_index(), " holds ", total,
                                                                 " bytes of stored samples; a batch may hold at most ",
                                                                 kMaxBatchBytes, ": ask for fewer samples per batch"));
        }
      }
    }
    if (!value_fields_.empty() && job->data) {  // the field region follows the image buffer
      const absl::Time t0 = absl::Now();
      AppendFieldRegion(value_fields_, &job->field_values, &job->header, job->data.get(), item_shapes_);
      std::vector<std::vector<std::string>>().swap(job->field_values);
      t.set_assemble_seconds(t.assemble_seconds() + absl::ToDoubleSeconds(absl::Now() - t0));
    }
  } catch (const std::bad_alloc&) {
    job->data.reset();
    absl::MutexLock lock(&job->mu);
    if (job->error.ok())
      job->error = OutOfMemory(job->header.batch_index(), job->header.total_bytes(), budget_->limit());
  }
  absl::Status status;
  {
    absl::MutexLock lock(&job->mu);
    status = job->error;
  }
  // The fields' charge goes with the buffer that holds them (a cache may
  // keep it past the stream); without one, now.
  if (const int64_t charge = job->field_charge.exchange(0); charge > 0) {
    if (job->data) {
      std::shared_ptr<std::string> held = std::move(job->data);
      MemoryBudget* budget = budget_;
      job->data = std::shared_ptr<std::string>(new std::string(std::move(*held)), [budget, charge](std::string* s) {
        delete s;
        budget->Release(charge);
      });
    } else {
      budget_->Release(charge);
    }
  }
  if (config_.cache_mode() == v1::CACHE_BATCH && status.ok())
    caches_.KeepBatch(job->data, job->header.sample_indices_size());
  FinishedBatch batch{status, std::move(job->header), std::move(job->data), absl::Now()};
  if (!job->cache_key.empty()) {
    // Sessions waiting for this batch get it (or, if this session was
    // cancelled midway, make it themselves); a whole one is kept.
    place_.cache->Finish(job->cache_key, cancelled_.load() ? nullptr : &batch);
  }
  job->done(std::move(batch));
}

}  // namespace stoker
