// Copies a store's objects into local files in large ranged reads, many in
// flight over all of them: an object of many blocks is read by many requests
// at once, a small one by one. Each object is written to PATH.stoker-part and
// renamed into place (with the object's modification time) when its last
// block has landed, so a reader never sees a torn file (part files are named
// for the process, so two processes never share one). Files are not synced:
// callers sync them (SyncFiles) before recording them as durable.
#ifndef STOKER_STORAGE_BLOCK_FETCH_H_
#define STOKER_STORAGE_BLOCK_FETCH_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "storage/storage.h"

namespace stoker {

// The suffix of a file being written.
inline constexpr const char kPartSuffix[] = ".stoker-part";

struct BlockFetchOptions {
  int64_t block_bytes = int64_t{8} << 20;      // bytes per ranged read
  int parallel = 16;                           // reads in flight
  std::atomic<int64_t>* bytes_done = nullptr;  // if set, each block's bytes are added once written (progress)
};

// Copies `objects` under `local_root` (local_root / key). The first error
// stops it (parts written are removed); CANCELLED once *cancelled turns true.
absl::Status FetchObjects(Storage& store, const std::vector<const ObjectInfo*>& objects,
                          const std::filesystem::path& local_root, const BlockFetchOptions& options,
                          const std::atomic<bool>* cancelled = nullptr);

// store.ReadRange, and DATA_LOSS naming the object unless exactly `length`
// bytes came (a block is never short: no hole in a copy, no rate from a
// short read).
absl::Status ReadWholeRange(Storage& store, const ObjectInfo& object, int64_t offset, int64_t length, std::string* out);

// Flushes the filesystem that holds `dir` (syncfs: one call for every file
// written there); an error names it.
absl::Status SyncFilesystem(const std::filesystem::path& dir);

}  // namespace stoker

#endif  // STOKER_STORAGE_BLOCK_FETCH_H_
