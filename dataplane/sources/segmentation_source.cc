#include "dataplane/sources/segmentation_source.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/fields/target_fields.h"
#include "dataplane/sources/dataset.h"
#include "glog/logging.h"

namespace stoker {
namespace fs = std::filesystem;

bool IsSegmentationLayout(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir / "images", ec) || !fs::is_directory(dir / "masks", ec)) return false;
  int directories = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    if (it->is_directory(entry_ec)) ++directories;
  }
  return directories == 2;
}

namespace {

// Regular files under `dir` (recursively) whose extension is in `wanted`
// (lower case, with the dot), as paths relative to `dir`, sorted; files
// that link outside `root` are left out.
absl::StatusOr<std::vector<std::string>> ListFiles(const fs::path& dir, const fs::path& root,
                                                   const std::set<std::string>& wanted,
                                                   const std::atomic<bool>* cancelled) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return absl::CancelledError(absl::StrCat("scan of ", dir.string(), " cancelled"));
    }
    std::error_code entry_ec;
    if (!it->is_regular_file(entry_ec)) continue;
    if (!wanted.count(absl::AsciiStrToLower(it->path().extension().string()))) continue;
    const fs::path real = fs::canonical(it->path(), entry_ec);
    if (entry_ec || !IsUnder(real, root)) continue;
    const fs::path rel = it->path().lexically_relative(dir);
    if (!rel.empty()) files.push_back(rel.string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string Stem(const std::string& rel) { return fs::path(rel).replace_extension().string(); }

}  // namespace

absl::StatusOr<std::shared_ptr<const SegmentationSource>> SegmentationSource::Open(const fs::path& dir,
                                                                                   const fs::path& data_root,
                                                                                   int64_t max_file_bytes,
                                                                                   const std::atomic<bool>* cancelled) {
  std::error_code ec;
  const fs::path root = fs::canonical(data_root, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("--data-root ", data_root.string(), ": ", ec.message()));
  absl::StatusOr<std::vector<std::string>> images = ListFiles(dir / "images", root, ImageExtensions(), cancelled);
  if (!images.ok()) return images.status();
  absl::StatusOr<std::vector<std::string>> masks = ListFiles(dir / "masks", root, {".png"}, cancelled);
  if (!masks.ok()) return masks.status();
  if (images->empty()) {
    return absl::NotFoundError(absl::StrCat("segmentation dataset ", dir.string(), " has no images in images/"));
  }
  std::map<std::string, std::string> mask_of;  // stem -> mask path
  for (const std::string& m : *masks) mask_of.emplace(Stem(m), m);
  std::shared_ptr<SegmentationSource> source(new SegmentationSource());
  source->dir_ = dir;
  source->max_file_bytes_ = max_file_bytes;
  FingerprintBuilder fingerprint;
  fingerprint.Add("segmentation");
  int64_t without = 0;
  for (const std::string& image : *images) {
    auto it = mask_of.find(Stem(image));
    Sample s{image, it == mask_of.end() ? "" : it->second};
    if (s.mask.empty()) ++without;
    const std::uintmax_t a = fs::file_size(dir / "images" / s.image, ec);
    const std::uintmax_t b = s.mask.empty() ? 0 : fs::file_size(dir / "masks" / s.mask, ec);
    fingerprint.Add(s.image).Add(s.mask).Add(static_cast<int64_t>(a)).Add(static_cast<int64_t>(b));
    source->samples_.push_back(std::move(s));
  }
  if (without > 0) {
    LOG(WARNING) << "segmentation dataset " << dir.string() << ": " << without << " of " << images->size()
                 << " images have no masks/<stem>.png; their samples fail as missing_field when the mask is asked for";
  }
  source->fingerprint_ = fingerprint.Finish();
  return std::shared_ptr<const SegmentationSource>(std::move(source));
}

absl::StatusOr<std::string> SegmentationSource::Read(int64_t index) const {
  return ReadFileBytes(dir_ / "images" / samples_[static_cast<size_t>(index)].image, max_file_bytes_);
}

absl::Status SegmentationSource::ReadTargets(int64_t index, const TargetNeeds& needs, SampleTargets* targets) const {
  if (!needs.mask) return absl::OkStatus();
  const Sample& s = samples_[static_cast<size_t>(index)];
  if (s.mask.empty()) {
    return DecodeError(DecodeFailure::kMissingField,
                       absl::StrCat(Describe(index), " has no mask (masks/",
                                    fs::path(s.image).replace_extension(".png").string(), ")"));
  }
  absl::StatusOr<std::string> bytes = ReadFileBytes(dir_ / "masks" / s.mask, max_file_bytes_);
  if (!bytes.ok()) return bytes.status();
  return DecodeMaskMember(*bytes, "masks/" + s.mask, targets, needs.max_pixels);
}

}  // namespace stoker
