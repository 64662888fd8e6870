// Video indexes (every frame's timestamp: video_decoder.h) kept per file, so
// that a sample's clips are chosen without demuxing the whole video again:
// in memory (the most recent entries, for every source) and, where the
// directory is writable, in a sidecar file (as the tar shards' index), so
// that a restarted server does not index again: <file>.stoker-index beside a
// class-per-folder tree's video, <shard>.stoker-index-frames/<offset> for a
// video inside a tar shard (SampleSource::MediaIndexHomeOf). An entry is
// used only while the file's (or shard's) size and modification time are
// those it was built from; a sidecar that is stale, malformed or out of
// range is rebuilt, never trusted. Entries are shared, not copied. Thread-safe.
#ifndef STOKER_DATAPLANE_DECODE_VIDEO_INDEX_CACHE_H_
#define STOKER_DATAPLANE_DECODE_VIDEO_INDEX_CACHE_H_

#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dataplane/base/file_stamp.h"
#include "dataplane/decode/video_decoder.h"

namespace stoker {

// Sidecar format. Load-bearing: bump the version when the format changes.
inline constexpr char kVideoIndexMagic[] = "stoker-video-index 1";
inline constexpr char kVideoIndexSuffix[] = ".stoker-index";
// The folder of a tar shard's sidecars: <shard><suffix>/<member offset>.
inline constexpr char kVideoIndexFolderSuffix[] = ".stoker-index-frames";

// The sidecar's text for `index` of a file stamped `stamp`, and its parse:
// nullopt unless the header names `stamp` and every value is in range
// (frames ascending, at most `limits.max_frames`, a size within
// `limits.max_pixels`, a span within `limits.max_seconds`).
std::string VideoIndexText(const FileStamp& stamp, const VideoIndex& index);
std::optional<VideoIndex> ParseVideoIndex(const std::string& text, const FileStamp& stamp, const VideoLimits& limits);

class VideoIndexCache {
 public:
  explicit VideoIndexCache(size_t max_entries = 4096) : max_entries_(max_entries) {}

  // The process's cache (one per server).
  static VideoIndexCache& Shared();

  // `key` names the file (a sidecar's path, or a source's fingerprint and
  // sample index); `stamp` is the content it must still have. `sidecar` (may
  // be empty): the file to read on a miss and to write after `build` (its
  // directory is made when missing). Returns the cached index or build()'s,
  // storing the latter.
  template <typename Build>
  absl::StatusOr<std::shared_ptr<const VideoIndex>> Get(const std::string& key, const FileStamp& stamp,
                                                        const std::filesystem::path& sidecar, const VideoLimits& limits,
                                                        Build build);

  // For tests and metrics.
  int64_t hits() const;
  int64_t sidecar_hits() const;
  int64_t builds() const;

 private:
  std::shared_ptr<const VideoIndex> Find(const std::string& key, const FileStamp& stamp);
  void Store(const std::string& key, const FileStamp& stamp, std::shared_ptr<const VideoIndex> index);
  std::shared_ptr<const VideoIndex> LoadSidecar(const std::filesystem::path& sidecar, const FileStamp& stamp,
                                                const VideoLimits& limits);
  void SaveSidecar(const std::filesystem::path& sidecar, const FileStamp& stamp, const VideoIndex& index);

  struct Entry {
    FileStamp stamp;
    std::shared_ptr<const VideoIndex> index;
    std::list<std::string>::iterator age;
  };
  const size_t max_entries_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> ages_ ABSL_GUARDED_BY(mu_);  // most recent first
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t sidecar_hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t builds_ ABSL_GUARDED_BY(mu_) = 0;
};

template <typename Build>
absl::StatusOr<std::shared_ptr<const VideoIndex>> VideoIndexCache::Get(const std::string& key, const FileStamp& stamp,
                                                                       const std::filesystem::path& sidecar,
                                                                       const VideoLimits& limits, Build build) {
  if (std::shared_ptr<const VideoIndex> hit = Find(key, stamp)) return hit;
  if (!sidecar.empty()) {
    if (std::shared_ptr<const VideoIndex> loaded = LoadSidecar(sidecar, stamp, limits)) {
      Store(key, stamp, loaded);
      return loaded;
    }
  }
  absl::StatusOr<VideoIndex> built = build();
  if (!built.ok()) return built.status();
  {
    absl::MutexLock lock(&mu_);
    ++builds_;
  }
  auto shared = std::make_shared<const VideoIndex>(*std::move(built));
  Store(key, stamp, shared);
  if (!sidecar.empty()) SaveSidecar(sidecar, stamp, *shared);
  return shared;
}

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_VIDEO_INDEX_CACHE_H_
