// Files written whole or not at all: the content goes to a uniquely named
// temporary file beside `path` (<path>.XXXXXX.tmp), which is then renamed over it (atomic on a
// POSIX file system), so readers and other writers of the same path (servers
// sharing an NFS directory, a restarted process) never see a part of it.
// With kDurable the file and then its directory are fsync'ed, so that the
// new content survives a crash. The file is made 0644. Thread-safe.
#ifndef STOKER_COMMON_ATOMIC_FILE_H_
#define STOKER_COMMON_ATOMIC_FILE_H_

#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stoker {

enum class Durability { kRenameOnly, kDurable };

// FAILED_PRECONDITION when no temporary file can be made beside `path` (a
// read-only directory: callers keeping a cache may carry on without it);
// INTERNAL when writing, syncing or renaming fails. No temporary file is
// left behind either way.
absl::Status WriteFileAtomically(const std::filesystem::path& path, absl::string_view content,
                                 Durability durability = Durability::kRenameOnly);

// fsync of a file or a directory; INTERNAL naming it when that fails.
absl::Status FsyncPath(const std::filesystem::path& path);

}  // namespace stoker

#endif  // STOKER_COMMON_ATOMIC_FILE_H_
