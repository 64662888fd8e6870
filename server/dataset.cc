#include "server/dataset.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "glog/logging.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/image_decoder.h"
#include "server/synthetic_source.h"
#include "server/tar_shards.h"

namespace stoker {
namespace fs = std::filesystem;
namespace {

// torchvision.datasets.folder.IMG_EXTENSIONS.
const std::set<std::string>& ImageExtensions() {
  static const auto* ext = new std::set<std::string>{".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                                     ".pgm", ".tif", ".tiff", ".webp"};
  return *ext;
}

bool IsUnder(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<fs::path> ResolveDatasetDir(const fs::path& data_root, const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("dataset: empty name");
  const fs::path rel(name);
  if (rel.is_absolute()) {
    return absl::PermissionDeniedError(
        absl::StrCat("dataset '", name, "' is an absolute path; give a name under --data-root"));
  }
  for (const auto& part : rel) {
    if (part == "..") {
      return absl::PermissionDeniedError(
          absl::StrCat("dataset '", name, "' contains '..'; it must stay under --data-root"));
    }
  }
  std::error_code ec;
  const fs::path root = fs::canonical(data_root, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("--data-root ", data_root.string(), ": ", ec.message()));
  const fs::path dir = fs::weakly_canonical(root / rel, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("dataset '", name, "': ", ec.message()));
  if (!IsUnder(dir, root)) {
    return absl::PermissionDeniedError(
        absl::StrCat("dataset '", name, "' resolves outside --data-root (through a symlink)"));
  }
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("dataset '", name, "' not found under --data-root"));
  }
  return dir;
}

absl::StatusOr<std::shared_ptr<const ImageFolderIndex>> ImageFolderIndex::Scan(
    const fs::path& dir, const fs::path& data_root, int64_t max_file_bytes) {
  std::error_code ec;
  const fs::path root = fs::canonical(data_root, ec);
  std::vector<fs::path> class_dirs;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return absl::NotFoundError(absl::StrCat("dataset ", dir.string(), ": ", ec.message()));
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    std::error_code entry_ec;
    if (!it->is_directory(entry_ec)) continue;
    // A class directory may be a symlink, but not to outside the root.
    const fs::path real = fs::canonical(it->path(), entry_ec);
    if (entry_ec || !IsUnder(real, root)) {
      LOG(WARNING) << "skipping class directory " << it->path().string() << ": outside --data-root or unreadable";
      continue;
    }
    class_dirs.push_back(it->path());
  }
  std::sort(class_dirs.begin(), class_dirs.end());

  auto index = std::make_shared<ImageFolderIndex>();
  FingerprintBuilder fingerprint;
  index->dir_ = dir;
  index->max_file_bytes_ = max_file_bytes;
  for (const fs::path& class_dir : class_dirs) {
    std::vector<std::pair<std::string, int64_t>> files;  // path, size
    const auto options = fs::directory_options::skip_permission_denied;
    fs::recursive_directory_iterator rit(class_dir, options, ec), rend;
    for (; !ec && rit != rend; rit.increment(ec)) {
      std::error_code entry_ec;
      if (!rit->is_regular_file(entry_ec)) continue;  // also a broken or looping symlink
      std::string ext = absl::AsciiStrToLower(rit->path().extension().string());
      if (!ImageExtensions().count(ext)) continue;
      const fs::path real = fs::canonical(rit->path(), entry_ec);
      if (entry_ec || !IsUnder(real, root)) continue;  // a symlink out of the root
      const fs::path rel = rit->path().lexically_relative(dir);  // no throwing overload
      const std::uintmax_t size = rit->file_size(entry_ec);
      if (!rel.empty()) files.emplace_back(rel.string(), entry_ec ? -1 : static_cast<int64_t>(size));
    }
    ec.clear();
    if (files.empty()) continue;  // torchvision skips classes without images too
    std::sort(files.begin(), files.end());
    const int32_t label = static_cast<int32_t>(index->class_names_.size());
    index->class_names_.push_back(class_dir.filename().string());
    fingerprint.Add(class_dir.filename().string());
    for (auto& [path, size] : files) {
      fingerprint.Add(path).Add(size).Add(label);
      index->samples_.push_back({std::move(path), label});
    }
  }
  if (index->samples_.empty()) {
    return absl::NotFoundError(absl::StrCat("dataset ", dir.string(),
                                            " has no images in class directories (root/<class>/<file>)"));
  }
  index->fingerprint_ = fingerprint.Finish();
  return std::shared_ptr<const ImageFolderIndex>(std::move(index));
}

absl::StatusOr<std::string> ImageFolderIndex::Read(int64_t index) const {
  return ReadFileBytes(dir_ / samples_[index].path, max_file_bytes_);
}

DatasetCatalog::DatasetCatalog(fs::path data_root, CatalogOptions options)
    : data_root_(std::move(data_root)), options_(options) {}

int DatasetCatalog::size() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(entries_.size());
}

absl::StatusOr<std::shared_ptr<const SampleSource>> DatasetCatalog::Open(const std::string& name) {
  std::string key = name;
  if (absl::StartsWith(name, kSyntheticPrefix)) {
    if (!options_.allow_synthetic) {
      return absl::PermissionDeniedError(
          absl::StrCat("dataset '", name, "': synthetic datasets are turned off on this server (--allow-synthetic)"));
    }
  } else {
    auto dir = ResolveDatasetDir(data_root_, name);
    if (!dir.ok()) return dir.status();
    key = dir->string();
  }
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Entry>& slot = entries_[key];
    if (slot) {
      // Another caller is opening it: wait for that result instead of scanning again.
      entry = slot;
      mu_.Await(absl::Condition(+[](Entry* e) { return !e->opening; }, entry.get()));
      if (!entry->status.ok()) return entry->status;
      entry->last_used = ++clock_;
      return entry->source;
    }
    slot = entry = std::make_shared<Entry>();
  }
  // Open outside the lock: a large tree takes a while and other datasets
  // should not wait.
  auto source = OpenUncached(name, key);
  absl::MutexLock lock(&mu_);
  entry->opening = false;
  if (!source.ok()) {
    // Waiters see the error; the entry goes, so a later call tries again.
    entry->status = source.status();
    entries_.erase(key);
    return source.status();
  }
  entry->source = *std::move(source);
  entry->last_used = ++clock_;
  std::shared_ptr<const SampleSource> result = entry->source;
  EvictLocked();
  return result;
}

void DatasetCatalog::EvictLocked() {
  while (static_cast<int>(entries_.size()) > std::max(1, options_.max_datasets)) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const Entry& e = *it->second;
      if (e.opening || e.source.use_count() > 1) continue;  // being opened, or held by a session
      if (victim == entries_.end() || e.last_used < victim->second->last_used) victim = it;
    }
    if (victim == entries_.end()) return;  // every one is in use
    entries_.erase(victim);
  }
}

absl::StatusOr<std::shared_ptr<const SampleSource>> DatasetCatalog::OpenUncached(const std::string& name,
                                                                               const std::string& key) {
  if (absl::StartsWith(name, kSyntheticPrefix)) {
    auto s = SyntheticSource::Open(name);
    if (!s.ok()) return s.status();
    return std::shared_ptr<const SampleSource>(*std::move(s));
  }
  const fs::path dir(key);
  if (HasTarShards(dir)) {
    auto s = TarShardSource::Open(dir, options_.max_file_bytes);
    if (!s.ok()) return s.status();
    return std::shared_ptr<const SampleSource>(*std::move(s));
  }
  auto s = ImageFolderIndex::Scan(dir, data_root_, options_.max_file_bytes);
  if (!s.ok()) return s.status();
  return std::shared_ptr<const SampleSource>(*std::move(s));
}

absl::StatusOr<std::string> ReadFileBytes(const fs::path& path, int64_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  const std::streamsize size = in.tellg();
  if (size < 0) return absl::DataLossError(absl::StrCat("cannot size ", path.string()));
  if (max_bytes > 0 && size > max_bytes) {
    return DecodeError(DecodeFailure::kTooLarge, absl::StrCat(path.filename().string(), " holds ", size,
                                                              " bytes; --max-file-bytes is ", max_bytes));
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) return absl::DataLossError(absl::StrCat("short read of ", path.string()));
  return bytes;
}

}  // namespace stoker
