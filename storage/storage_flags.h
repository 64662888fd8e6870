// The storage flags shared by the programs that read a data root
// (stoker-server, stoker-storage, stoker-materialize, stoker-diagnose): the S3 endpoint and region, anonymous
// access, an HTTP(S) token file and CA file, retries, and the local cache of
// a remote data root (--cache-dir, --cache-bytes). Linked only into those
// mains; read after flag parsing.
#ifndef STOKER_STORAGE_STORAGE_FLAGS_H_
#define STOKER_STORAGE_STORAGE_FLAGS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/block_fetch.h"
#include "storage/storage.h"
#include "storage/store_mirror.h"

namespace stoker {

absl::StatusOr<StorageOptions> StorageOptionsFromFlags();

// How a cold cache's copy reads (--fetch-parallel; blocks as the mirror's).
BlockFetchOptions FetchOptionsFromFlags();

// For a remote --data-root (s3://, http(s)://): the store with its local
// copy in --cache-dir. INVALID_ARGUMENT naming the flag that is wrong.
absl::StatusOr<std::unique_ptr<StoreMirror>> MirrorFromFlags(const std::string& data_root);

}  // namespace stoker

#endif  // STOKER_STORAGE_STORAGE_FLAGS_H_
