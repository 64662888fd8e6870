#include "dataplane/sessions/data_service_core.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/await.h"
#include "common/field_spec.h"
#include "common/job_name.h"
#include "dataplane/fields/sample_fields.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sample/stored_sample.h"
#include "dataplane/sessions/store_output.h"

namespace stoker {

absl::StatusOr<std::unique_ptr<DataServiceCore>> DataServiceCore::Create(CoreConfig config, ServerMetrics* metrics) {
  absl::StatusOr<UserOps> user = StartUserOps(config.python, config.op_plugins, metrics);
  if (!user.ok()) return user.status();
  return std::make_unique<DataServiceCore>(std::move(config), metrics, *std::move(user));
}

DataServiceCore::DataServiceCore(CoreConfig config, ServerMetrics* metrics, UserOps user)
    : config_(std::move(config)),
      metrics_(metrics),
      user_(std::move(user)),
      catalog_(config_.data_root, config_.catalog),
      budget_(config_.max_inflight_bytes),
      admission_(config_.admission),
      batch_cache_(config_.batch_cache_bytes > 0 ? std::make_unique<BatchCache>(config_.batch_cache_bytes, metrics)
                                                 : nullptr),
      tokenizers_(config_.data_root),
      pool_(config_.workers, [metrics](const std::string& share, absl::Duration worked) {
        metrics->JobWorkerSeconds(share).Increment(absl::ToDoubleSeconds(worked));
      }) {
  metrics_->workers->Set(pool_.num_threads());
  metrics_->capacity->SetWorkers(pool_.num_threads());
}

absl::Status CheckJob(const v1::SessionConfig& config, double max_weight) {
  const std::string& job = config.job();
  if (job.size() > kMaxJobNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("job name of ", job.size(), " characters; at most ", kMaxJobNameLength));
  }
  for (char c : job) {
    if (!IsJobNameChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat("job name '", absl::CHexEscape(job), "' has '",
                                                     absl::CHexEscape(std::string(1, c)),
                                                     "'; allowed: letters, digits and ", kJobNamePunctuation));
    }
  }
  const double w = config.weight();
  if (w != 0 && !(w >= kMinJobWeight && w <= max_weight)) {  // NaN fails too
    return absl::InvalidArgumentError(absl::StrCat("weight = ", w, "; allowed: 0 (means 1) or ", kMinJobWeight,
                                                   " up to ", max_weight, " (stoker-server --max-job-weight)"));
  }
  return absl::OkStatus();
}

absl::Status CheckStoredPrefix(const std::string& dataset, const SampleSource& source, const Pipeline& pipeline) {
  const StoredForm* stored = source.stored();
  if (stored == nullptr) return absl::OkStatus();
  const std::vector<v1::Op>& ops = pipeline.ops();
  bool fits = ops.size() >= stored->prefix.size();
  for (size_t i = 0; fits && i < stored->prefix.size(); ++i) {
    fits = ops[i].SerializeAsString() == stored->prefix[i].SerializeAsString();
  }
  if (fits) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "dataset '", dataset, "' is materialised: its samples are stored after '", PipelineToText(stored->prefix),
      "', but the session's pipeline '", PipelineToText(ops),
      "' does not begin with those ops; begin the pipeline with them (the rest runs online), or read the source "
      "dataset"));
}

// A materialised dataset stores its source samples' members as they were,
// beside pixels that went through the stored prefix: value fields are
// served, targets (a mask member) are not.
absl::Status CheckStoredFields(const std::string& dataset, const SampleSource& source,
                               const google::protobuf::RepeatedPtrField<v1::FieldSpec>& fields) {
  const StoredForm* stored = source.stored();
  if (stored == nullptr) return absl::OkStatus();
  for (const v1::FieldSpec& f : fields) {
    const bool of_tree =
        f.kind() == v1::IMAGE || ((f.kind() == v1::CLASS || f.kind() == v1::CLASSES) && f.extensions().empty());
    if (of_tree) continue;
    if (!source.has_members()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "field '", f.name(), "': dataset '", dataset,
          "' was materialised before datasets stored their samples' "
          "fields (its manifest lists none); materialise its source again to have them, or read the source"));
    }
    if (f.kind() == v1::MASK) {
      return absl::FailedPreconditionError(
          absl::StrCat("field '", f.name(), "' (mask): dataset '", dataset,
                       "' is materialised, and it stores its members as "
                       "they were, not moved with the pixels; read the mask from the source dataset"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSessionFields(const v1::SessionConfig& config, int64_t max_field_bytes) {
  if (config.fields().empty()) {
    if (config.max_field_bytes() != 0) {
      return absl::InvalidArgumentError("max_field_bytes is set but the session names no fields");
    }
    return absl::OkStatus();
  }
  if (absl::Status s = CheckFields(config, max_field_bytes); !s.ok()) return s;
  const bool tokens = std::any_of(config.fields().begin(), config.fields().end(),
                                  [](const v1::FieldSpec& f) { return f.kind() == v1::TOKENS; });
  if (tokens && config.tokenizer().empty()) {
    return absl::InvalidArgumentError(
        "a field of kind tokens needs the session's tokenizer: a SentencePiece model file under --data-root");
  }
  if (config.max_tokens() < 0 || config.max_tokens() > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens = ", config.max_tokens(), "; allowed 0 (all) up to 65536"));
  }
  const float v = config.box_min_visibility();
  if (!(v >= 0 && v <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("box_min_visibility = ", v, "; allowed 0..1"));
  }
  if (config.cache_mode() != v1::CACHE_NONE) {
    return absl::FailedPreconditionError(absl::StrCat("cache_mode ", v1::CacheMode_Name(config.cache_mode()),
                                                      " serves images alone; a session with fields needs CACHE_NONE"));
  }
  if (config.has_store()) {
    return absl::FailedPreconditionError(
        "materialising stores the image alone; a materialising session cannot name fields");
  }
  return absl::OkStatus();
}

absl::StatusOr<DataServiceCore::Prepared> DataServiceCore::Prepare(const v1::SessionConfig& config, Pipeline pipeline,
                                                                   std::optional<StoredFormat> store,
                                                                   SourceOrError source) {
  if (!source.ok()) {
    if (!IsStillOpening(source.status())) metrics_->rejected_sessions->Increment();
    return source.status();
  }
  const std::string& fingerprint = (*source)->fingerprint();
  if (!config.expected_fingerprint().empty() && config.expected_fingerprint() != fingerprint) {
    metrics_->rejected_sessions->Increment();
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset '", config.dataset(), "' on this server has fingerprint ", fingerprint, "; the session expects ",
        config.expected_fingerprint(), ": this server has another copy or version of the dataset"));
  }
  if (config.has_store() && (*source)->stored() != nullptr) {
    metrics_->rejected_sessions->Increment();
    return absl::FailedPreconditionError(
        absl::StrCat("dataset '", config.dataset(), "' is materialised already; materialise its source instead"));
  }
  if (absl::Status fits = CheckStoredPrefix(config.dataset(), **source, pipeline); !fits.ok()) {
    metrics_->rejected_sessions->Increment();
    return fits;
  }
  std::shared_ptr<const Tokenizer> tokenizer;
  // Loaded only for a session with a tokens field: a tokenizer named by one
  // without is never read.
  const bool tokens = std::any_of(config.fields().begin(), config.fields().end(),
                                  [](const v1::FieldSpec& f) { return f.kind() == v1::TOKENS; });
  if (tokens && !config.tokenizer().empty()) {
    // A remote data root's model is copied into its cache first.
    const absl::Status fetched = config_.catalog.fetch
                                     ? config_.catalog.fetch(config.tokenizer(), /*directory=*/false, nullptr)
                                     : absl::OkStatus();
    absl::StatusOr<std::shared_ptr<const Tokenizer>> loaded =
        fetched.ok() ? tokenizers_.Get(config.tokenizer()) : absl::StatusOr<std::shared_ptr<const Tokenizer>>(fetched);
    if (!loaded.ok()) {
      metrics_->rejected_sessions->Increment();
      return loaded.status();
    }
    tokenizer = *std::move(loaded);
  }
  if (absl::Status fits = CheckStoredFields(config.dataset(), **source, config.fields()); !fits.ok()) {
    metrics_->rejected_sessions->Increment();
    return fits;
  }
  if (absl::Status fits = CheckFieldsFitSource(config.dataset(), **source, config.fields()); !fits.ok()) {
    metrics_->rejected_sessions->Increment();
    return fits;
  }
  const MediaKind wants = pipeline.audio() != nullptr ? MediaKind::kAudio
                          : pipeline.video()          ? MediaKind::kVideo
                                                      : MediaKind::kImage;
  if (wants != (*source)->media()) {
    metrics_->rejected_sessions->Increment();
    static const char* const kHolds[] = {"images", "audio files", "video files"};
    static const char* const kStarts[] = {"image ops", "audio(...)", "video_clip(...)"};
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", config.dataset(), "' holds ", kHolds[static_cast<int>((*source)->media())],
        ": its pipeline starts with ", kStarts[static_cast<int>((*source)->media())], ", not ",
        kStarts[static_cast<int>(wants)],
        " (a class-per-folder tree of .wav/.flac/.mp3/.ogg/.opus/.m4a files, or "
        "tar shards whose samples have such a member and no image, is audio; of .mp4/.mkv/.webm/.avi/.mov files "
        "video)"));
  }
  return Prepared{std::move(pipeline), *std::move(source), std::move(store), std::move(tokenizer)};
}

namespace {
constexpr int kMaxShardWindow = 65536;
}  // namespace

void DataServiceCore::PrepareAsync(const v1::SessionConfig& config, absl::Duration patience, PreparedDone done) {
  std::optional<StoredFormat> store;
  absl::StatusOr<Pipeline> pipeline = absl::InvalidArgumentError("");
  if (config.pipeline_size() > config_.max_pipeline_ops) {  // before anything is made of them
    pipeline = absl::InvalidArgumentError(absl::StrCat("the pipeline has ", config.pipeline_size(),
                                                       " ops; this server "
                                                       "allows at most ",
                                                       config_.max_pipeline_ops, " (--max-pipeline-ops)"));
  } else {
    pipeline = config.has_store() ? StorePipeline(config, &store.emplace()) : Pipeline::Create(config, user_);
  }
  if (absl::Status job = CheckJob(config, config_.max_job_weight); pipeline.ok() && !job.ok()) pipeline = job;
  if (absl::Status fields = CheckSessionFields(config, config_.max_field_bytes); pipeline.ok() && !fields.ok()) {
    pipeline = fields;
  }
  if (pipeline.ok() && (!v1::ShuffleOrder_IsValid(config.shuffle()) || config.shard_window() < 0 ||
                        config.shard_window() > kMaxShardWindow)) {
    pipeline = absl::InvalidArgumentError(absl::StrCat("shuffle = ", config.shuffle(),
                                                       ", shard_window = ", config.shard_window(),
                                                       "; shuffle is SHUFFLE_GLOBAL or "
                                                       "SHUFFLE_SHARDS and shard_window 0..",
                                                       kMaxShardWindow));
  }
  if (pipeline.ok() && config.cache_mode() != v1::CACHE_NONE && !config_.allow_cache_modes) {
    pipeline = absl::FailedPreconditionError(
        absl::StrCat("cache_mode ", v1::CacheMode_Name(config.cache_mode()),
                     " is turned off on this server (--allow-cache-modes=false); use CACHE_NONE"));
  }
  if (!pipeline.ok()) {  // refused before any scan starts
    metrics_->rejected_sessions->Increment();
    return done(pipeline.status());
  }
  auto shared = std::make_shared<Pipeline>(*std::move(pipeline));
  catalog_.OpenAsync(
      config.dataset(),
      [this, config, shared, store, done = std::move(done)](SourceOrError source) {
        done(Prepare(config, std::move(*shared), store, std::move(source)));
      },
      patience, config.annotations());
}

void DataServiceCore::OpenSessionAsync(const v1::SessionConfig& config, absl::Duration patience, OpenDone done) {
  PrepareAsync(config, patience, [this, config, done = std::move(done)](absl::StatusOr<Prepared> prepared) {
    if (!prepared.ok()) return done(prepared.status());
    v1::OpenSessionResponse response;
    response.set_capacity_images_per_second(metrics_->capacity->ImagesPerSecond());
    response.set_workers(workers());
    response.set_num_samples(prepared->source->size());
    for (const std::string& name : prepared->source->class_names()) response.add_class_names(name);
    if (!config.has_store()) {  // a materialising session's samples differ in size
      for (int64_t d : prepared->pipeline.SampleShape()) response.add_sample_shape(d);
      response.set_sample_bytes(prepared->pipeline.sample_bytes());
    }
    response.set_dataset_fingerprint(prepared->source->fingerprint());
    response.set_unlabeled_samples(prepared->source->unlabeled_samples());
    if (config.shuffle() == v1::SHUFFLE_SHARDS) {
      for (int64_t n : prepared->source->ShardSizes()) response.add_shard_sizes(n);
    }
    done(std::move(response));
  });
}

void DataServiceCore::StartSessionAsync(const v1::SessionConfig& config, std::function<void(SessionOrError)> done) {
  PrepareAsync(
      config, absl::InfiniteDuration(), [this, config, done = std::move(done)](absl::StatusOr<Prepared> prepared) {
        if (!prepared.ok()) return done(prepared.status());
        absl::StatusOr<std::unique_ptr<Admission::Ticket>> ticket = admission_.Admit(config.job());
        if (!ticket.ok()) {
          metrics_->full_refusals->Increment();
          return done(ticket.status());
        }
        SessionPlace place;
        place.share =
            pool_.Join(config.job().empty() ? "unnamed" : config.job(), config.weight() > 0 ? config.weight() : 1.0);
        place.ticket = *std::move(ticket);
        place.cache = batch_cache_.get();
        place.tokenizer = prepared->tokenizer;
        done(std::make_unique<BatchSession>(config, std::move(prepared->source), std::move(prepared->pipeline), &pool_,
                                            metrics_, &failure_log_, &budget_, config_, std::move(prepared->store),
                                            std::move(place)));
      });
}

DataServiceCore::SessionOrError DataServiceCore::StartSession(const v1::SessionConfig& config) {
  return Await<SessionOrError>(
      [&](std::function<void(SessionOrError)> done) { StartSessionAsync(config, std::move(done)); });
}

}  // namespace stoker
