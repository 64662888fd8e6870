// Materialises a dataset: runs a pipeline's deterministic prefix (decode,
// resize, center_crop) once over every sample, on local worker threads or on
// a pool of data servers (RemoteMaker), and stores the result as WebDataset-style tar shards plus a manifest
// (dataplane/sources/manifest.h) that a data server serves from (MaterializedSource).
//
// Crash safety: the output is built in OUT.partial; each shard is written to
// a temporary file, made durable, renamed, and then recorded
// (OUT.partial/progress/shard-NNNNNN.tar.json; work_dir.h). A rerun with the same settings
// keeps the recorded shards and makes the rest, so an interrupted run ends
// with exactly one copy of every sample; shards are byte-identical whoever
// made them. OUT itself appears (or is swapped for the old one, with
// --overwrite) only when complete: it is never half-overwritten.
// Materialize() is thread-safe for distinct outputs.
#ifndef STOKER_MATERIALIZE_MATERIALIZER_H_
#define STOKER_MATERIALIZE_MATERIALIZER_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dataplane/sample/stored_sample.h"
#include "dataplane/sources/manifest.h"
#include "proto/stoker/v1/stoker.pb.h"
#include "storage/held_object.h"

namespace stoker {

// A sample made on a data server: its stored bytes, or why it could not be made.
struct MadeSample {
  int64_t index = 0;
  int32_t label = 0;
  absl::StatusOr<std::string> stored;
  // The source sample's other members (WebDataset fields), stored beside
  // the pixels under their own extensions.
  std::vector<StoredField> fields;
  std::string path;  // names the sample (file, or shard:member) when it failed
};

// Makes stored samples on a pool of data servers (stoker-materialize
// --servers; materialize/remote_maker.h), with the client's pull scheduling
// and exactly-once delivery. The materialiser's only view of the servers, so
// that it links no gRPC.
class RemoteMaker {
 public:
  virtual ~RemoteMaker() = default;
  // The source dataset as the servers index it.
  virtual int64_t size() const = 0;
  virtual const std::string& fingerprint() const = 0;
  virtual const std::vector<std::string>& class_names() const = 0;
  // Makes the given batches (ascending; batch b holds samples
  // [b x batch_size, (b + 1) x batch_size) clipped to size()) and hands every
  // sample to `sink` once, in index order, on the calling thread. Stops with
  // the sink's first error, the servers' error, or CANCELLED once *cancel
  // (nullable) turns true.
  virtual absl::Status Make(int64_t batch_size, const std::vector<int64_t>& batches,
                            const std::function<absl::Status(MadeSample)>& sink, const std::atomic<bool>* cancel) = 0;
};

// Opens the session for (dataset, prefix, format) on the servers, asking
// for each sample's fields (StoredOutput.fields); their
// refusals (a random op, a bad format, an unknown or materialised dataset)
// come back as they are.
using ConnectRemote = std::function<absl::StatusOr<std::unique_ptr<RemoteMaker>>(
    const std::string& dataset, const std::vector<v1::Op>& prefix, const StoredFormat& format)>;

struct MaterializeConfig {
  std::filesystem::path data_root = ".";
  std::string dataset;  // under data_root, or "synthetic:..."
  // Set for a remote source (storage/store_mirror.h): brings the dataset's
  // local copy under data_root up to date before it is opened.
  std::function<absl::Status(const std::string& name, bool directory, const std::atomic<bool>* cancelled)> fetch;
  // The shards of a fetched name that stay in the store (StoreMirror::Streamer).
  std::function<StreamedShards(const std::string& name)> streamed;
  std::vector<v1::Op> prefix;  // deterministic ops only; empty: decoded pixels
  StoredFormat format;
  std::filesystem::path out;
  int workers = 1;
  // Set: the samples are made by data servers (data_root and workers unused),
  // `batch_size` samples per request (lowered to a divisor of the shard size
  // when resuming). Shards are byte-identical to local workers' either way,
  // so a run may be resumed by the other.
  ConnectRemote remote;
  int64_t batch_size = 16;
  // 0: every sample. Otherwise an evenly spaced sample of this many of the
  // source's samples (stoker-profile measures strategies on one); the
  // output is then a dataset of that many.
  int64_t sample = 0;
  // Samples per shard; 0: enough for about shard_bytes per shard (estimated
  // from the first samples), but at least four shards per worker when the
  // dataset allows, so that every worker has work.
  int64_t shard_samples = 0;
  int64_t shard_bytes = int64_t{256} << 20;
  bool overwrite = false;  // replace an existing OUT (once the new one is complete)
  int64_t max_pixels = 100'000'000;
  int64_t max_file_bytes = int64_t{256} << 20;
  absl::Duration progress_every = absl::Seconds(1);
  absl::Duration test_sample_delay = absl::ZeroDuration();  // test-only: slows each sample
  // When set and it turns true, the run stops after the samples under way
  // (CANCELLED); the shards made so far are kept for a rerun.
  const std::atomic<bool>* cancel = nullptr;
};

struct MaterializeProgress {
  int64_t done = 0;  // samples stored or failed, this run and resumed
  int64_t total = 0;
  int64_t failed = 0;
  int64_t stored_bytes = 0;       // of the shards finished, resumed ones included
  double samples_per_second = 0;  // this run's
  absl::Duration eta = absl::InfiniteDuration();
};

struct MaterializeReport {
  Manifest manifest;
  std::filesystem::path out;
  int64_t shards_resumed = 0;  // recorded by an earlier, interrupted run
  int64_t shards_made = 0;
  int64_t stored_bytes = 0;  // all shards
  absl::Duration took;
};

using ProgressFn = std::function<void(const MaterializeProgress&)>;

// Runs to completion (or the first error that is not one sample's: a sample
// that cannot be read or decoded is listed in the manifest's "failed" and
// the run goes on). `progress` (may be empty) is called on the calling
// thread every config.progress_every and once at the end.
// INVALID_ARGUMENT: a random op in the prefix (named), a materialised source;
// FAILED_PRECONDITION: OUT exists without --overwrite, or OUT.partial holds an
// interrupted run with other settings (named).
absl::StatusOr<MaterializeReport> Materialize(const MaterializeConfig& config, const ProgressFn& progress = {});

// "shard-000012.tar": load-bearing, the shard names sort in sample order.
std::string ShardName(int64_t shard);

}  // namespace stoker

#endif  // STOKER_MATERIALIZE_MATERIALIZER_H_
