// What identifies a file's content for caches kept beside it (video indexes):
// its size and modification time.
#ifndef STOKER_DATAPLANE_BASE_FILE_STAMP_H_
#define STOKER_DATAPLANE_BASE_FILE_STAMP_H_

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <optional>

namespace stoker {

struct FileStamp {
  int64_t size = -1;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp& o) const { return size == o.size && mtime_ns == o.mtime_ns; }
  bool operator!=(const FileStamp& o) const { return !(*this == o); }
};

inline FileStamp StampOf(const struct stat& st) {
  return FileStamp{static_cast<int64_t>(st.st_size), int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

// The stamp of `path`, or nullopt when it cannot be stat'ed.
inline std::optional<FileStamp> StampOf(const std::filesystem::path& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return StampOf(st);
}

}  // namespace stoker

#endif  // STOKER_DATAPLANE_BASE_FILE_STAMP_H_
