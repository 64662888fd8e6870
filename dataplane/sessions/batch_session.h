// The data server's core, free of gRPC: validates sessions and turns batch
// requests into finished batches on the worker pool. DataServiceCore is
// thread-safe and outlives every BatchSession it starts; a BatchSession is
// thread-safe and belongs to one stream. RPC semantics: see stoker.proto.
#ifndef STOKER_DATAPLANE_SESSIONS_BATCH_SESSION_H_
#define STOKER_DATAPLANE_SESSIONS_BATCH_SESSION_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dataplane/base/server_metrics.h"
#include "dataplane/base/worker_pool.h"
#include "dataplane/fields/target_fields.h"
#include "dataplane/fields/tokenizer.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/sample/stored_sample.h"
#include "dataplane/sessions/admission.h"
#include "dataplane/sessions/batch_cache.h"
#include "dataplane/sessions/memory_budget.h"
#include "dataplane/sessions/session_caches.h"
#include "dataplane/sessions/stream_session.h"
#include "dataplane/sources/dataset.h"
#include "dataplane/user_ops/op_plugins.h"
#include "dataplane/user_ops/python_stage.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct CoreConfig {
  std::filesystem::path data_root = ".";
  int workers = 1;
  // Largest image (width x height) decoded, checked from the header before
  // any pixel buffer is allocated; larger ones fail as too_large.
  int64_t max_pixels = 100'000'000;
  // Longest audio stream decoded, in seconds, announced or found; longer
  // ones fail as too_large.
  double max_media_seconds = 3600;
  // Most frames a video stream may have (from its index); more fail as
  // too_large.
  int64_t max_video_frames = 1'000'000;
  // Threads decoding one video clip; 0: the workers shared among the clips
  // being decoded (decoder_threads.h).
  int video_decoder_threads = 0;
  // CPU time one sample may take on its worker (decode, ops, fields; not a
  // Python worker's own time, which --python-transform-timeout-ms bounds);
  // past it the sample stops at the next check and its batch fails as
  // retryable (DEADLINE_EXCEEDED), never replaced: a timer depends on load.
  // Zero: no limit.
  absl::Duration max_sample_cpu = absl::Seconds(60);
  // Most ops a session's pipeline may have (at most kMaxPipelineOps); more
  // are refused at OpenSession naming --max-pipeline-ops.
  int max_pipeline_ops = kMaxPipelineOps;
  // Test-only: extra worker time per sample, to make a server slow.
  absl::Duration sample_delay = absl::ZeroDuration();
  // Test-only: reads throttled to this many bytes per second and worker
  // (0: no limit), to make storage slow.
  int64_t test_read_bytes_per_second = 0;
  // Size of one streamed chunk (the last one of a batch may be smaller).
  int64_t chunk_bytes = int64_t{4} << 20;
  // File-size limit, dataset cache bound, synthetic datasets on or off.
  CatalogOptions catalog;
  // Bytes of batches in flight (accepted and not yet written) over all
  // streams; <= 0: half the machine's memory.
  int64_t max_inflight_bytes = 0;
  // Batches in flight per stream, and their bytes (one client cannot take the
  // whole in-flight budget by asking for many large batches on one stream).
  int max_outstanding_batches = 64;
  int64_t max_stream_bytes = int64_t{1} << 30;
  // Sessions may ask for the diagnostic cache modes (CacheMode in
  // stoker.proto); false refuses them with FAILED_PRECONDITION.
  bool allow_cache_modes = true;
  // Bytes one session's CACHE_RAW / CACHE_DECODED cache may hold; its entries
  // are also taken from the server's in-flight budget. Once full, samples
  // reuse the slots already filled.
  int64_t max_cache_bytes_per_session = int64_t{1} << 30;
  // Largest SessionConfig.weight a job may ask for.
  double max_job_weight = 100;
  // Sessions (streams) and jobs served at once; 0: no limit.
  AdmissionLimits admission;
  // Bytes of finished batches shared between sessions with the same data
  // configuration (batch_cache.h); 0: off.
  int64_t batch_cache_bytes = 0;
  // Largest SessionConfig.max_field_bytes a session may ask for: one text,
  // bytes or json value of a sample (stoker-server --max-field-bytes).
  int64_t max_field_bytes = int64_t{16} << 20;
  // The operator's own ops: Python transform stages (modules empty: none)
  // and the directory of C++ op plugins to load (empty: none).
  PythonStageConfig python;
  std::filesystem::path op_plugins;
};

// What a session holds of the server besides its config: its job's share of
// the workers, its admission ticket, and the shared batch cache (nullable).
struct SessionPlace {
  std::unique_ptr<WorkerPool::Share> share;
  std::unique_ptr<Admission::Ticket> ticket;
  BatchCache* cache = nullptr;
  std::shared_ptr<const Tokenizer> tokenizer;  // SessionConfig.tokenizer, loaded (null: none)
};

// The smallest SessionConfig.weight besides 0 (which means 1).
inline constexpr double kMinJobWeight = 0.01;

// OK, or INVALID_ARGUMENT naming SessionConfig.job or .weight and what is
// allowed.
absl::Status CheckJob(const v1::SessionConfig& config, double max_weight);

class FailureLog;

class BatchSession final : public StreamSession {
 public:
  // `store` is set for a materialising session (SessionConfig.store): then
  // `pipeline` is its prefix and samples are sent encoded in that format.
  BatchSession(v1::SessionConfig config, std::shared_ptr<const SampleSource> source, Pipeline pipeline,
               WorkerPool* pool, ServerMetrics* metrics, FailureLog* failure_log, MemoryBudget* budget,
               const CoreConfig& core, std::optional<StoredFormat> store, SessionPlace place = {});
  ~BatchSession() override;

  // Checks the request against the session (INVALID_ARGUMENT naming the field
  // and the allowed range) and schedules its samples. On OK, `done` runs
  // exactly once, on a worker thread, with the finished batch; it also runs
  // after Cancel, then with whatever was produced.
  absl::Status Submit(const v1::BatchRequest& request, DoneCallback done) override;

  // Makes queued samples of this session skip their work.
  void Cancel() override { cancelled_.store(true); }
  // The image bytes of the batch (the stream takes them from the budget
  // before it is made); its field values are taken as they are read
  // (ChargeFields) and released with its buffer.
  int64_t BatchBytes(const v1::BatchRequest& request) const override;
  v1::CacheMode cache_mode() const override { return config_.cache_mode(); }

 private:
  struct Job;
  void RunSample(const std::shared_ptr<Job>& job, int64_t slot);
  absl::Status BatchFailure(const Job& job, int64_t index, const absl::Status& status) const;
  // The batch fails with `error` (unless it failed already), and its other
  // samples stop at their next check.
  static void Abandon(Job& job, absl::Status error);
  // Takes a made slot's field values from the budget; when they do not fit,
  // the batch fails with RESOURCE_EXHAUSTED naming --max-inflight-bytes.
  void ChargeFields(Job& job, const std::vector<std::string>& values);
  // Reads and produces sample `index` into dst, and its value fields (when
  // the session has any) into *fields; counts and logs a failure.
  absl::Status ProduceSample(int64_t epoch, int64_t index, uint8_t* dst, std::vector<std::string>* fields, Job& job);
  // An audio or video sample from its file's bytes (batch_session_media.cc):
  // the pipeline's window or clips into dst, a video's audio track into its
  // field; a video's index from the shared cache (or its sidecar), else a
  // demux whose result is kept.
  absl::Status ProduceMedia(int64_t index, const std::string& encoded, Rng& rng, uint8_t* dst, SampleTimes* times,
                            std::vector<std::string>* fields) const;
  // A materialising session: sample `index` encoded as stored, into *out.
  absl::Status ProduceStored(int64_t index, std::string* out, Job& job);
  // Runs a read of fields or targets with any exception (bad_alloc of a huge
  // mask, a library's throw) turned into the sample's failure.
  absl::Status Guarded(int64_t index, const std::function<absl::Status()>& read) const;
  // Counts and logs (once per sample) a failure; returns it.
  absl::Status Failed(int64_t index, const absl::Status& status, const std::string& reason);
  // The source's Read, with any exception turned into an error.
  absl::StatusOr<std::string> ReadSample(int64_t index) const;
  // Runs the pipeline on a sample's bytes as the source stores them (an
  // encoded image, or a materialised dataset's stored prefix output).
  absl::Status ProduceFromBytes(std::string bytes, Rng& rng, uint8_t* dst, SampleTimes* times, UserOpIo* io) const;
  // The whole image the ops from first_op_ start from (CACHE_DECODED).
  absl::StatusOr<cv::Mat> DecodeWhole(const std::string& bytes) const;
  // A materialised sample's uncompressed bytes as an RGB image: a raw one
  // points into `plain`, which must outlive it; errors are decode failures.
  absl::StatusOr<cv::Mat> StoredImage(const std::string& plain) const;
  // A materialised sample's compression undone; errors are corrupt samples.
  absl::StatusOr<std::string> Unpack(absl::string_view bytes) const;
  int64_t MaxStoredBytes() const;
  // CACHE_DECODED: the ops on a cached decoded image.
  absl::Status ProduceFromDecodedCache(int64_t epoch, int64_t index, uint8_t* dst, Job& job);
  // Under SKIP: the next decodable sample after `index` in the epoch's order.
  absl::Status Replace(int64_t epoch, int64_t index, uint8_t* dst, std::vector<std::string>* fields, Job& job,
                       int64_t* replacement);
  std::shared_ptr<const std::vector<int64_t>> EpochPositions(int64_t epoch, std::vector<int64_t>* order);
  void Complete(const std::shared_ptr<Job>& job);
  bool TryServeFromCache(const std::shared_ptr<Job>& job);
  // Schedules the job's samples on the pool.
  void Make(const std::shared_ptr<Job>& job);
  // The shared batch cache (place_.cache): true when the job is answered
  // from it (a kept batch, or one another session is making); false when
  // this session makes it (and then Complete hands it to the cache).
  bool TryShared(const std::shared_ptr<Job>& job, const v1::BatchRequest& request);

  // Constant after construction.
  const v1::SessionConfig config_;
  const std::shared_ptr<const SampleSource> source_;
  const Pipeline pipeline_;
  WorkerPool* const pool_;
  ServerMetrics* const metrics_;
  FailureLog* const failure_log_;
  const int64_t max_pixels_;
  const double max_media_seconds_;
  const absl::Duration max_sample_cpu_;
  const int64_t max_video_frames_;
  const int video_decoder_threads_, workers_;
  const absl::Duration sample_delay_;
  const int64_t read_bytes_per_second_;
  MemoryBudget* const budget_;
  // The first op to run: after a materialised dataset's stored prefix.
  const size_t first_op_;
  // Set in a materialising session (SessionConfig.store): pipeline_ is the
  // prefix and samples are sent encoded in this format.
  const std::optional<StoredFormat> store_;
  const SessionPlace place_;
  // The batch cache's key for this session's batches ("" without a cache).
  const std::string cache_key_;
  prometheus::Counter* const job_samples_;
  // SessionConfig.fields: the value fields (all but the image), the image
  // member's extensions (empty: the source's image), the value byte limit.
  const std::vector<v1::FieldSpec> value_fields_;
  const std::vector<std::string> image_extensions_;
  const int64_t max_field_bytes_;
  // Which value fields are targets (target_fields.h), what the source must
  // read for them, and their item shapes in the header.
  const std::vector<TargetRole> target_roles_;
  const bool has_targets_;       // some role is a target (neither kMember nor kAudioTrack)
  const int audio_track_field_;  // the value field of kind AUDIO_TRACK, or value_fields_.size()
  const TargetNeeds target_needs_;
  const std::vector<std::vector<int64_t>> item_shapes_;
  // What a client accepts of one sample's field values (MaxSampleFieldBytes):
  // a sample past it fails alone as too_large.
  const int64_t max_sample_field_bytes_;

  // CACHE_BATCH, CACHE_RAW, CACHE_DECODED (session_caches.h).
  SessionCaches caches_;

  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  // SKIP: the last epoch's order and each sample's position in it, built on
  // the first failure of that epoch.
  int64_t order_epoch_ ABSL_GUARDED_BY(mu_) = -1;
  std::shared_ptr<const std::vector<int64_t>> order_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const std::vector<int64_t>> positions_ ABSL_GUARDED_BY(mu_);
};

// Remembers which samples failed, so each is logged once. Thread-safe.
class FailureLog {
 public:
  // True the first time `where` is seen.
  bool FirstTime(const std::string& where);

 private:
  absl::Mutex mu_;
  std::set<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SESSIONS_BATCH_SESSION_H_
