#include "storage/remote_root.h"

#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace stoker {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

std::filesystem::path DefaultCacheDir() {
  if (std::string dir = Env("STOKER_CACHE_DIR"); !dir.empty()) return dir;
  const std::string tmp = Env("TMPDIR");
  return std::filesystem::path(tmp.empty() ? "/tmp" : tmp) / absl::StrCat("stoker-cache-", ::getuid());
}

StorageOptions StorageOptionsFromEnv() {
  StorageOptions o;
  o.ca_file = Env("STOKER_STORAGE_CA_FILE");
  o.http_bearer_token_file = Env("STOKER_STORAGE_TOKEN_FILE");
  return o;
}

absl::StatusOr<MirrorOptions> MirrorOptionsFromEnv() {
  MirrorOptions m;
  m.cache_dir = DefaultCacheDir();
  if (const std::string bytes = Env("STOKER_CACHE_BYTES"); !bytes.empty()) {
    if (!absl::SimpleAtoi(bytes, &m.cache_bytes) || m.cache_bytes <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("STOKER_CACHE_BYTES='", bytes, "'; expected a positive number of bytes"));
    }
  }
  const std::string stream = Env("STOKER_STREAM_SHARDS");
  if (!stream.empty() && stream != "0" && stream != "1") {
    return absl::InvalidArgumentError(absl::StrCat("STOKER_STREAM_SHARDS='", stream, "'; expected 0 or 1"));
  }
  m.stream_shards = stream == "1";
  return m;
}

absl::StatusOr<std::unique_ptr<StoreMirror>> OpenMirror(const std::string& data_root, const StorageOptions& storage,
                                                        MirrorOptions mirror) {
  absl::StatusOr<std::unique_ptr<Storage>> store = OpenStorage(data_root, storage);
  if (!store.ok()) return store.status();
  return StoreMirror::Create(*std::move(store), std::move(mirror));
}

}  // namespace stoker
