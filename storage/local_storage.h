// The local filesystem as a Storage: keys are paths below a directory; reads
// are pread(2) into the caller's string (no cache, no extra copy). The
// pinned version of a file is its size and modification time. Thread-safe.
#ifndef STOKER_STORAGE_LOCAL_STORAGE_H_
#define STOKER_STORAGE_LOCAL_STORAGE_H_

#include <memory>
#include <string>

#include "storage/storage.h"

namespace stoker {

// INVALID_ARGUMENT when `directory` is not a directory.
absl::StatusOr<std::unique_ptr<Storage>> OpenLocalStorage(absl::string_view directory);

}  // namespace stoker

#endif  // STOKER_STORAGE_LOCAL_STORAGE_H_
