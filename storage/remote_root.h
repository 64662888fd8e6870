// A remote data root (s3://, http(s)://) as the programs and the client's
// local mode open it: the store, and its datasets' local copies in a bounded
// cache (store_mirror.h). Programs with flags take these defaults where a
// flag is not given; the client's local mode (the Python loader's
// data_root=, stoker-bench --local-workers) has only them:
//
//   STOKER_CACHE_DIR           where copies go (else $TMPDIR/stoker-cache-<uid>)
//   STOKER_CACHE_BYTES         most bytes kept there (else 256 GiB)
//   STOKER_STREAM_SHARDS       1: leave tar shards in the store, fetched when read
//                              (store_mirror.h; a dataset larger than the cache is anyway)
//   STOKER_STORAGE_CA_FILE     PEM CAs for https:// (else the system's)
//   STOKER_STORAGE_TOKEN_FILE  a bearer token for http(s):// (first line)
//
// S3's endpoint, region and credentials come from the AWS variables and files
// as the AWS tools read them (aws_credentials.h).
#ifndef STOKER_STORAGE_REMOTE_ROOT_H_
#define STOKER_STORAGE_REMOTE_ROOT_H_

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/storage.h"
#include "storage/store_mirror.h"

namespace stoker {

// The cache directory the environment names, else $TMPDIR/stoker-cache-<uid>.
std::filesystem::path DefaultCacheDir();

// StorageOptions with the CA and token files from the environment.
StorageOptions StorageOptionsFromEnv();

// MirrorOptions with the cache directory and size from the environment;
// INVALID_ARGUMENT naming STOKER_CACHE_BYTES when it is not a positive count.
absl::StatusOr<MirrorOptions> MirrorOptionsFromEnv();

// The store at `data_root` with its local copy.
absl::StatusOr<std::unique_ptr<StoreMirror>> OpenMirror(const std::string& data_root, const StorageOptions& storage,
                                                        MirrorOptions mirror);

}  // namespace stoker

#endif  // STOKER_STORAGE_REMOTE_ROOT_H_
