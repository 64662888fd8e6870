#include "dataplane/decode/video_index_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"

namespace stoker {
namespace fs = std::filesystem;

std::string VideoIndexText(const FileStamp& stamp, const VideoIndex& index) {
  char tick[64];
  std::snprintf(tick, sizeof(tick), "%.17g", index.seconds_per_tick);
  std::string out = absl::StrCat(kVideoIndexMagic, " ", stamp.size, " ", stamp.mtime_ns, " ", index.width, " ",
                                 index.height, " ", tick, " ", index.pts.size(), "\n");
  for (size_t i = 0; i < index.pts.size(); ++i) absl::StrAppend(&out, i == 0 ? "" : " ", index.pts[i]);
  out += "\n";
  return out;
}

std::optional<VideoIndex> ParseVideoIndex(const std::string& text, const FileStamp& stamp, const VideoLimits& limits) {
  const size_t eol = text.find('\n');
  if (eol == std::string::npos) return std::nullopt;
  const std::string header = text.substr(0, eol);
  const std::string magic = kVideoIndexMagic;
  if (header.rfind(magic + " ", 0) != 0) return std::nullopt;
  const std::vector<std::string> parts = absl::StrSplit(header.substr(magic.size() + 1), ' ');
  int64_t size = 0, mtime = 0, frames = 0;
  int width = 0, height = 0;
  double tick = 0;
  if (parts.size() != 6 || !absl::SimpleAtoi(parts[0], &size) || !absl::SimpleAtoi(parts[1], &mtime) ||
      !absl::SimpleAtoi(parts[2], &width) || !absl::SimpleAtoi(parts[3], &height) ||
      !absl::SimpleAtod(parts[4], &tick) || !absl::SimpleAtoi(parts[5], &frames)) {
    return std::nullopt;
  }
  if (FileStamp{size, mtime} != stamp || width < 1 || height < 1 ||
      (limits.max_pixels > 0 && int64_t{width} * height > limits.max_pixels) || !(tick > 0) || !std::isfinite(tick) ||
      frames < 1 || frames > limits.max_frames) {
    return std::nullopt;
  }
  VideoIndex index;
  index.width = width;
  index.height = height;
  index.seconds_per_tick = tick;
  index.pts.reserve(static_cast<size_t>(frames));
  for (absl::string_view v :
       absl::StrSplit(absl::string_view(text).substr(eol + 1), absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    int64_t pts = 0;
    if (static_cast<int64_t>(index.pts.size()) >= frames || !absl::SimpleAtoi(v, &pts) ||
        (!index.pts.empty() && pts <= index.pts.back())) {
      return std::nullopt;
    }
    index.pts.push_back(pts);
  }
  if (static_cast<int64_t>(index.pts.size()) != frames) return std::nullopt;
  // A duration over --max-media-seconds (set lower since it was written) is indexed again, and refused.
  const double span = static_cast<double>(index.pts.back() - index.pts.front()) * tick;
  if (limits.max_seconds > 0 && span > limits.max_seconds) return std::nullopt;
  return index;
}

VideoIndexCache& VideoIndexCache::Shared() {
  static auto* cache = new VideoIndexCache();
  return *cache;
}

int64_t VideoIndexCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}
int64_t VideoIndexCache::sidecar_hits() const {
  absl::MutexLock lock(&mu_);
  return sidecar_hits_;
}
int64_t VideoIndexCache::builds() const {
  absl::MutexLock lock(&mu_);
  return builds_;
}

std::shared_ptr<const VideoIndex> VideoIndexCache::Find(const std::string& key, const FileStamp& stamp) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.stamp != stamp) return nullptr;
  ages_.splice(ages_.begin(), ages_, it->second.age);
  ++hits_;
  return it->second.index;
}

void VideoIndexCache::Store(const std::string& key, const FileStamp& stamp, std::shared_ptr<const VideoIndex> index) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    it->second.stamp = stamp;
    it->second.index = std::move(index);
    ages_.splice(ages_.begin(), ages_, it->second.age);
    return;
  }
  ages_.push_front(key);
  entries_.emplace(key, Entry{stamp, std::move(index), ages_.begin()});
  while (entries_.size() > max_entries_) {
    entries_.erase(ages_.back());
    ages_.pop_back();
  }
}

std::shared_ptr<const VideoIndex> VideoIndexCache::LoadSidecar(const fs::path& sidecar, const FileStamp& stamp,
                                                               const VideoLimits& limits) {
  std::ifstream in(sidecar, std::ios::binary);
  if (!in) return nullptr;
  // At most ~21 bytes per frame: a forged sidecar cannot make us read gigabytes.
  const int64_t cap = 256 + 21 * std::max<int64_t>(1, limits.max_frames);
  std::string text;
  text.resize(static_cast<size_t>(std::min<int64_t>(cap, int64_t{64} << 20)));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  std::optional<VideoIndex> index = ParseVideoIndex(text, stamp, limits);
  if (!index) return nullptr;
  absl::MutexLock lock(&mu_);
  ++sidecar_hits_;
  return std::make_shared<const VideoIndex>(*std::move(index));
}

void VideoIndexCache::SaveSidecar(const fs::path& sidecar, const FileStamp& stamp, const VideoIndex& index) {
  std::error_code ec;
  fs::create_directory(sidecar.parent_path(), ec);  // a shard's folder of sidecars; exists for a tree's
  // Servers sharing the directory may write the same sidecar at once: each
  // write is whole and the contents agree. A read-only directory keeps the
  // index in memory only.
  (void)WriteFileAtomically(sidecar, VideoIndexText(stamp, index));
}

}  // namespace stoker
