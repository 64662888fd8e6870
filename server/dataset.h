// Datasets a server can read: resolving a dataset name safely under the data
// root, and the index of an ImageFolder tree (root/<class>/<file>). An index is
// immutable once built and shared by every session that reads the dataset.
#ifndef STOKER_SERVER_DATASET_H_
#define STOKER_SERVER_DATASET_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/sample_source.h"

namespace stoker {

// Resolves `name` to a directory under `data_root`. INVALID_ARGUMENT for an
// empty name, PERMISSION_DENIED for an absolute name, one with "..", or one
// that resolves (through symlinks) outside the root, NOT_FOUND when there is
// no such directory.
absl::StatusOr<std::filesystem::path> ResolveDatasetDir(const std::filesystem::path& data_root,
                                                        const std::string& name);

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
  static absl::StatusOr<std::shared_ptr<const ImageFolderIndex>> Scan(
      const std::filesystem::path& dir, const std::filesystem::path& data_root, int64_t max_file_bytes = 0);

  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<SampleRef>& samples() const { return samples_; }

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  const std::vector<std::string>& class_names() const override { return class_names_; }
  int32_t label(int64_t index) const override { return samples_[index].label; }
  std::string Describe(int64_t index) const override { return samples_[index].path; }
  absl::StatusOr<std::string> Read(int64_t index) const override;
  const std::string& fingerprint() const override { return fingerprint_; }

 private:
  std::filesystem::path dir_;
  std::string fingerprint_;
  int64_t max_file_bytes_ = 0;
  std::vector<std::string> class_names_;
  std::vector<SampleRef> samples_;
};

struct CatalogOptions {
  // Samples larger than this many bytes fail as too_large (0: no limit).
  int64_t max_file_bytes = int64_t{256} << 20;
  // Opened datasets kept for later sessions. Past this, the least recently
  // used one that no session holds is dropped (it is reopened when asked for).
  int max_datasets = 64;
  // Whether "synthetic:WxH[:N[:C]]" names are served.
  bool allow_synthetic = true;
};

// Opens each dataset once and hands the shared source to every session. A
// name "synthetic:..." is a SyntheticSource; a directory holding *.tar files
// is a TarShardSource; any other directory an ImageFolder tree. Concurrent
// first opens of one dataset scan it once (the others wait for that scan).
// Thread-safe.
class DatasetCatalog {
 public:
  explicit DatasetCatalog(std::filesystem::path data_root, CatalogOptions options = {});

  // Errors as ResolveDatasetDir and the sources' Open/Scan; PERMISSION_DENIED
  // for a synthetic name when those are not allowed.
  absl::StatusOr<std::shared_ptr<const SampleSource>> Open(const std::string& name);

  // Datasets held open now (for tests and metrics).
  int size();

 private:
  struct Entry {
    bool opening = true;
    absl::Status status;
    std::shared_ptr<const SampleSource> source;
    int64_t last_used = 0;
  };
  absl::StatusOr<std::shared_ptr<const SampleSource>> OpenUncached(const std::string& name, const std::string& key);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::filesystem::path data_root_;
  const CatalogOptions options_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
};

// Reads a whole file. NOT_FOUND / DATA_LOSS name the path; a file larger than
// `max_bytes` (0: no limit) is too_large (see image_decoder.h).
absl::StatusOr<std::string> ReadFileBytes(const std::filesystem::path& path, int64_t max_bytes = 0);

}  // namespace stoker

#endif  // STOKER_SERVER_DATASET_H_
