#include "server/dataset.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

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
    const fs::path& dir, const fs::path& data_root) {
  std::error_code ec;
  const fs::path root = fs::canonical(data_root, ec);
  std::vector<fs::path> class_dirs;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory()) class_dirs.push_back(entry.path());
  }
  if (ec) return absl::NotFoundError(absl::StrCat("dataset ", dir.string(), ": ", ec.message()));
  std::sort(class_dirs.begin(), class_dirs.end());

  auto index = std::make_shared<ImageFolderIndex>();
  index->dir_ = dir;
  for (const fs::path& class_dir : class_dirs) {
    std::vector<std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(class_dir, ec)) {
      if (!entry.is_regular_file()) continue;
      std::string ext = absl::AsciiStrToLower(entry.path().extension().string());
      if (!ImageExtensions().count(ext)) continue;
      if (entry.is_symlink() && !IsUnder(fs::canonical(entry.path(), ec), root)) continue;
      files.push_back(fs::relative(entry.path(), dir).string());
    }
    if (files.empty()) continue;  // torchvision skips classes without images too
    std::sort(files.begin(), files.end());
    const int32_t label = static_cast<int32_t>(index->class_names_.size());
    index->class_names_.push_back(class_dir.filename().string());
    for (std::string& f : files) index->samples_.push_back({std::move(f), label});
  }
  if (index->samples_.empty()) {
    return absl::NotFoundError(absl::StrCat("dataset ", dir.string(),
                                            " has no images in class directories (root/<class>/<file>)"));
  }
  return std::shared_ptr<const ImageFolderIndex>(std::move(index));
}

DatasetCatalog::DatasetCatalog(fs::path data_root) : data_root_(std::move(data_root)) {}

absl::StatusOr<std::shared_ptr<const ImageFolderIndex>> DatasetCatalog::Open(const std::string& name) {
  auto dir = ResolveDatasetDir(data_root_, name);
  if (!dir.ok()) return dir.status();
  {
    absl::MutexLock lock(&mu_);
    auto it = indexes_.find(*dir);
    if (it != indexes_.end()) return it->second;
  }
  // Scan outside the lock: a large tree takes a while and other datasets
  // should not wait. Two concurrent first opens both scan; one result wins.
  auto index = ImageFolderIndex::Scan(*dir, data_root_);
  if (!index.ok()) return index.status();
  absl::MutexLock lock(&mu_);
  return indexes_.emplace(*dir, *std::move(index)).first->second;
}

absl::StatusOr<std::string> ReadFileBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  const std::streamsize size = in.tellg();
  if (size < 0) return absl::DataLossError(absl::StrCat("cannot size ", path.string()));
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) return absl::DataLossError(absl::StrCat("short read of ", path.string()));
  return bytes;
}

}  // namespace stoker
