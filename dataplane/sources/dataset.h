// Datasets a server can read: resolving a dataset name safely under the data
// root, and the index of an ImageFolder tree (root/<class>/<file>). An index is
// immutable once built and shared by every session that reads the dataset.
#ifndef STOKER_DATAPLANE_SOURCES_DATASET_H_
#define STOKER_DATAPLANE_SOURCES_DATASET_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dataplane/base/data_root.h"
#include "dataplane/base/worker_pool.h"
#include "dataplane/decode/file_kinds.h"
#include "dataplane/sample/sample_source.h"
#include "dataplane/sources/tar_shards.h"

namespace stoker {

// Resolves `name` to a directory under `data_root`. INVALID_ARGUMENT for an
// empty name, PERMISSION_DENIED for an absolute name, one with "..", or one
// that resolves (through symlinks) outside the root, NOT_FOUND when there is
// no such directory.
absl::StatusOr<std::filesystem::path> ResolveDatasetDir(const std::filesystem::path& data_root,
                                                        const std::string& name);
// The same rules for any name: ResolveUnderRoot (base/data_root.h).

// The file names each media kind is read from: ImageExtensions() and the
// others (decode/file_kinds.h).

struct SampleRef {
  std::string path;  // relative to the dataset directory
  int32_t label;
};

// An ImageFolder tree: labels are the indices of the sorted class directory
// names, and samples are sorted by class, then file name, as torchvision's
// ImageFolder does. Files count when their extension (any case) is one of
// torchvision's image extensions.
class ImageFolderIndex final : public SampleSource {
 public:
  // Scans `dir`. NOT_FOUND when it has no class directory with an image;
  // symlinked files that point outside `data_root` are skipped.
  // Reads of files larger than `max_file_bytes` (0: no limit) fail as too_large.
  // CANCELLED as soon as `*cancelled` (when given) turns true.
  // With `kind` kAudio or kVideo, the files counted are AudioExtensions()
  // or VideoExtensions() instead (a tree of clips; media() is then `kind`).
  static absl::StatusOr<std::shared_ptr<const ImageFolderIndex>> Scan(const std::filesystem::path& dir,
                                                                      const std::filesystem::path& data_root,
                                                                      int64_t max_file_bytes = 0,
                                                                      const std::atomic<bool>* cancelled = nullptr,
                                                                      MediaKind kind = MediaKind::kImage);

  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<SampleRef>& samples() const { return samples_; }

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  const std::vector<std::string>& class_names() const override { return class_names_; }
  int32_t label(int64_t index) const override { return samples_[index].label; }
  std::string Describe(int64_t index) const override { return samples_[index].path; }
  absl::StatusOr<std::string> Read(int64_t index) const override;
  std::optional<MediaIndexHome> MediaIndexHomeOf(int64_t index) const override;
  const std::string& fingerprint() const override { return fingerprint_; }
  MediaKind media() const override { return media_; }

 private:
  MediaKind media_ = MediaKind::kImage;
  std::filesystem::path dir_;
  std::string fingerprint_;
  int64_t max_file_bytes_ = 0;
  std::vector<std::string> class_names_;
  std::vector<SampleRef> samples_;
};

using SourceOrError = absl::StatusOr<std::shared_ptr<const SampleSource>>;

struct CatalogOptions {
  // Samples larger than this many bytes fail as too_large (0: no limit).
  int64_t max_file_bytes = int64_t{256} << 20;
  // Opened datasets kept for later sessions. Past this, the least recently
  // used one that no session holds is dropped (it is reopened when asked for).
  int max_datasets = 64;
  // Whether "synthetic:WxH[:N[:C]]" names are served.
  bool allow_synthetic = true;
  // Threads that scan datasets (never gRPC's: a large tree takes minutes).
  int scan_threads = 2;
  // Largest annotation file read (COCO instances JSON), in bytes; larger
  // ones are refused at open. 0: no limit.
  int64_t max_annotation_bytes = int64_t{1} << 30;
  // How a resolved dataset is opened: (name, resolved key, cancelled flag).
  // Empty: the real sources. Tests inject slow or failing openers here.
  std::function<SourceOrError(const std::string& name, const std::string& key, const std::atomic<bool>* cancelled)>
      opener;
  // Brings a name under the data root up to date before it is opened, on the
  // scan threads: (name, whether it is a directory, cancelled). A remote
  // store's local copy (storage/store_mirror.h). Empty: the data root is local.
  std::function<absl::Status(const std::string& name, bool directory, const std::atomic<bool>* cancelled)> fetch;
  // What that fetch is doing for a name now (StoreMirror::Progress), told to those
  // waiting for the dataset. Empty: they hear only that it is being copied.
  std::function<std::string(const std::string& name)> fetch_progress;
  // The shards of a fetched name that stay in the store, read through held
  // copies (StoreMirror::Streamed and Hold). Empty, or none: all are local.
  std::function<StreamedShards(const std::string& name)> streamed;
};

// Opens each dataset once, on the catalog's own scan threads, and hands the
// shared source to every session. A name "synthetic:..." is a
// SyntheticSource; a directory with a manifest.json is a materialised
// dataset (MaterializedSource); one holding *.tar files is a TarShardSource; any
// other directory an ImageFolder tree. Concurrent first opens of one dataset
// scan it once. Thread-safe.
class DatasetCatalog {
 public:
  using Done = std::function<void(SourceOrError)>;

  explicit DatasetCatalog(std::filesystem::path data_root, CatalogOptions options = {});
  // Stops, then waits for the timer and scan threads (a running scan is
  // cancelled).
  ~DatasetCatalog();

  // Calls `done` exactly once with the source or the error: at once (on this
  // thread) when the answer is known now, else on a scan thread when the scan
  // ends, or with UNAVAILABLE from Stop. When the scan has not ended within
  // `patience`, `done` gets (on the catalog's timer thread) UNAVAILABLE for
  // which IsStillOpening() holds, naming the dataset and how long it has been
  // scanned, instead; the scan goes on. Errors as
  // ResolveDatasetDir and the sources' Open/Scan; PERMISSION_DENIED for a
  // synthetic name when those are not allowed.
  // `annotations` (a file under the data root) makes the dataset an
  // annotated one (CocoSource): images and annotations opened as one source;
  // INVALID_ARGUMENT with a synthetic name (it has no image directory).
  void OpenAsync(const std::string& name, Done done, absl::Duration patience = absl::InfiniteDuration(),
                 const std::string& annotations = "");
  // Waits for OpenAsync's answer (tools and tests).
  SourceOrError Open(const std::string& name);
  // Shutting down: every caller still waiting gets UNAVAILABLE, running scans
  // are cancelled, and later opens of datasets not open yet are refused.
  void Stop();

  // Datasets held open now (for tests and metrics).
  int size();

 private:
  struct Entry {
    bool opening = true;
    std::string name;         // as asked for (for messages)
    std::string annotations;  // resolved annotation file, or empty
    absl::Status status;
    std::shared_ptr<const SampleSource> source;
    int64_t last_used = 0;
    absl::Time started;
    std::atomic<bool> fetching{false};  // options_.fetch is copying it from its store
    struct Waiter {
      Done done;
      absl::Time deadline;  // then answered "still being opened"
    };
    std::vector<Waiter> waiters;  // while opening
  };
  // Answers waiters whose patience has run out, until Stop.
  void RunTimer();
  void Scan(std::string name, std::string key, std::shared_ptr<Entry> entry);
  SourceOrError OpenUncached(const std::string& name, const std::string& key, Entry& entry);
  // The answer to a waiter out of patience.
  absl::Status StillOpeningAnswer(const Entry& entry, absl::Duration scanning) const;
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::filesystem::path data_root_;
  const CatalogOptions options_;
  std::atomic<bool> stopped_{false};
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  bool timer_wake_ ABSL_GUARDED_BY(mu_) = false;  // a deadline was added, or Stop
  std::thread timer_;
  WorkerPool scans_;  // last: its threads stop before the rest is destroyed
};

// Whether `status` is OpenAsync's "the dataset is still being opened", and
// whether it was still being copied from its store (a remote data root).
bool IsStillOpening(const absl::Status& status);
bool IsStillCopyingFromStore(const absl::Status& status);

// Reads a whole file. NOT_FOUND / DATA_LOSS name the path; a file larger than
// `max_bytes` (0: no limit) is too_large (see image_decoder.h).
absl::StatusOr<std::string> ReadFileBytes(const std::filesystem::path& path, int64_t max_bytes = 0);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SOURCES_DATASET_H_
