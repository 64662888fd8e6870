#include "storage/storage.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "storage/catalog_storage.h"
#include "storage/http_storage.h"
#include "storage/local_storage.h"
#include "storage/s3_storage.h"
#include "storage/url.h"

namespace stoker {

absl::Status CheckRange(const Storage& storage, const ObjectInfo& object, int64_t offset, int64_t length) {
  if (offset >= 0 && length >= 0 && offset + length <= object.size) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat("bytes ", offset, "..", offset + length, " of ",
                                            storage.Describe(object.key), " (", object.size, " bytes)"));
}

absl::StatusOr<std::vector<ObjectInfo>> StatAll(Storage& storage, const std::vector<std::string>& keys, int parallel) {
  std::vector<ObjectInfo> out(keys.size());
  std::vector<absl::Status> errors(keys.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (size_t i = next++; i < keys.size() && !failed.load(); i = next++) {
      absl::StatusOr<ObjectInfo> info = storage.Stat(keys[i]);
      if (info.ok()) {
        out[i] = *std::move(info);
      } else {
        errors[i] = info.status();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t n = std::min<size_t>(std::max(1, parallel), keys.size());
  for (size_t t = 0; t < n; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  for (const absl::Status& e : errors) {
    if (!e.ok()) return e;
  }
  return out;
}

bool IsRemoteRoot(absl::string_view root) {
  return (root.find("://") != absl::string_view::npos && !absl::StartsWithIgnoreCase(root, "file://")) ||
         absl::StartsWith(root, kCatalogScheme);
}

absl::StatusOr<std::unique_ptr<Storage>> OpenStorage(absl::string_view root, const StorageOptions& options) {
  if (absl::ConsumePrefix(&root, kCatalogScheme)) {
    std::error_code ec;  // one cache per catalog, however its path is spelt
    const std::filesystem::path canonical =
        std::filesystem::weakly_canonical(std::filesystem::path(std::string(root)), ec);
    const std::string file = ec ? std::string(root) : canonical.string();
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    if (!in || !(text << in.rdbuf()) || text.str().size() > (size_t{16} << 20)) {
      return absl::InvalidArgumentError(absl::StrCat("catalog ", file, " cannot be read (or is over 16 MiB)"));
    }
    return OpenCatalogStorage(file, text.str(), options);
  }
  if (root.find("://") == absl::string_view::npos) return OpenLocalStorage(root);
  absl::StatusOr<Url> url = ParseUrl(root);
  if (!url.ok()) return url.status();
  if (url->scheme == "file") return OpenLocalStorage(url->path.empty() ? "/" : url->path);
  if (url->scheme == "s3") return OpenS3Storage(*url, options);
  return OpenHttpStorage(*url, options);
}

SequentialReader::SequentialReader(Storage* storage, ObjectInfo object, int64_t block_bytes)
    : storage_(storage), object_(std::move(object)), block_bytes_(std::max<int64_t>(1, block_bytes)) {}

absl::Status SequentialReader::Read(int64_t n, std::string* out) {
  while (n > 0 && position_ < object_.size) {
    const int64_t in_block = block_start_ + static_cast<int64_t>(block_.size()) - position_;
    if (in_block <= 0) {
      block_.clear();
      block_start_ = position_;
      const int64_t length = std::min(block_bytes_, object_.size - position_);
      if (absl::Status s = storage_->ReadRange(object_, position_, length, &block_); !s.ok()) return s;
      continue;
    }
    const int64_t take = std::min(n, in_block);
    out->append(block_, static_cast<size_t>(position_ - block_start_), static_cast<size_t>(take));
    position_ += take;
    n -= take;
  }
  return absl::OkStatus();
}

}  // namespace stoker
