// Video indexes (every frame's timestamp: video_decoder.h) kept per file, so
// that a sample's clips are chosen without demuxing the whole video again:
// in memory (the most recent entries, for every source) and, for a file of a
// class-per-folder tree whose directory is writable, in a sidecar
// <file>.stoker-index beside it (as the tar shards' index), so that a
// restarted server does not index again. An entry is used only while the
// file's size and modification time are those it was built from; a sidecar
// that is stale, malformed or out of range is rebuilt, never trusted.
// Thread-safe.
#ifndef STOKER_DATAPLANE_VIDEO_INDEX_CACHE_H_
#define STOKER_DATAPLANE_VIDEO_INDEX_CACHE_H_

#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dataplane/video_decoder.h"

namespace stoker {

// Sidecar format. Load-bearing: bump the version when the format changes.
inline constexpr char kVideoIndexMagic[] = "stoker-video-index 1";
inline constexpr char kVideoIndexSuffix[] = ".stoker-index";

// What identifies a file's content for the cache: its size and mtime.
struct FileStamp {
  int64_t size = -1;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp& o) const { return size == o.size && mtime_ns == o.mtime_ns; }
};
// The stamp of `path`, or nullopt when it cannot be stat'ed.
std::optional<FileStamp> StampOf(const std::filesystem::path& path);

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

  // `key` names the file (a path, or a source's fingerprint and sample
  // index); `stamp` is the content it must still have. `sidecar` (may be
  // empty): the file whose sidecar to read on a miss and to write after
  // `build`. Returns the cached index or build()'s, storing the latter.
  template <typename Build>
  absl::StatusOr<VideoIndex> Get(const std::string& key, const FileStamp& stamp, const std::filesystem::path& sidecar,
                                 const VideoLimits& limits, Build build);

  // For tests and metrics.
  int64_t hits() const;
  int64_t sidecar_hits() const;
  int64_t builds() const;

 private:
  std::optional<VideoIndex> Find(const std::string& key, const FileStamp& stamp);
  void Store(const std::string& key, const FileStamp& stamp, const VideoIndex& index);
  std::optional<VideoIndex> LoadSidecar(const std::filesystem::path& file, const FileStamp& stamp,
                                        const VideoLimits& limits);
  void SaveSidecar(const std::filesystem::path& file, const FileStamp& stamp, const VideoIndex& index);

  struct Entry {
    FileStamp stamp;
    VideoIndex index;
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
absl::StatusOr<VideoIndex> VideoIndexCache::Get(const std::string& key, const FileStamp& stamp,
                                                const std::filesystem::path& sidecar, const VideoLimits& limits,
                                                Build build) {
  if (std::optional<VideoIndex> hit = Find(key, stamp)) return *std::move(hit);
  if (!sidecar.empty()) {
    if (std::optional<VideoIndex> loaded = LoadSidecar(sidecar, stamp, limits)) {
      Store(key, stamp, *loaded);
      return *std::move(loaded);
    }
  }
  absl::StatusOr<VideoIndex> built = build();
  if (!built.ok()) return built.status();
  {
    absl::MutexLock lock(&mu_);
    ++builds_;
  }
  Store(key, stamp, *built);
  if (!sidecar.empty()) SaveSidecar(sidecar, stamp, *built);
  return built;
}

}  // namespace stoker

#endif  // STOKER_DATAPLANE_VIDEO_INDEX_CACHE_H_
