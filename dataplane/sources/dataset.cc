#include "dataplane/sources/dataset.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/await.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/video_index_cache.h"
#include "dataplane/sources/coco_source.h"
#include "dataplane/sources/materialized_source.h"
#include "dataplane/sources/segmentation_source.h"
#include "dataplane/sources/synthetic_source.h"
#include "dataplane/sources/tar_shards.h"
#include "glog/logging.h"

namespace stoker {
namespace fs = std::filesystem;

absl::StatusOr<fs::path> ResolveDatasetDir(const fs::path& data_root, const std::string& name) {
  return ResolveUnderRoot(data_root, name, "dataset", /*directory=*/true);
}

absl::StatusOr<std::shared_ptr<const ImageFolderIndex>> ImageFolderIndex::Scan(const fs::path& dir,
                                                                               const fs::path& data_root,
                                                                               int64_t max_file_bytes,
                                                                               const std::atomic<bool>* cancelled,
                                                                               MediaKind kind) {
  const std::set<std::string>& extensions = kind == MediaKind::kAudio   ? AudioExtensions()
                                            : kind == MediaKind::kVideo ? VideoExtensions()
                                                                        : ImageExtensions();
  auto stop = [cancelled] { return cancelled != nullptr && cancelled->load(std::memory_order_relaxed); };
  const absl::Status cancel_status = absl::CancelledError(absl::StrCat("scan of ", dir.string(), " cancelled"));
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
  index->media_ = kind;
  index->max_file_bytes_ = max_file_bytes;
  for (const fs::path& class_dir : class_dirs) {
    std::vector<std::pair<std::string, int64_t>> files;  // path, size
    const auto options = fs::directory_options::skip_permission_denied;
    fs::recursive_directory_iterator rit(class_dir, options, ec), rend;
    for (; !ec && rit != rend; rit.increment(ec)) {
      if (stop()) return cancel_status;
      std::error_code entry_ec;
      if (!rit->is_regular_file(entry_ec)) continue;  // also a broken or looping symlink
      std::string ext = absl::AsciiStrToLower(rit->path().extension().string());
      if (!extensions.count(ext)) continue;
      const fs::path real = fs::canonical(rit->path(), entry_ec);
      if (entry_ec || !IsUnder(real, root)) continue;            // a symlink out of the root
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
    return absl::NotFoundError(absl::StrCat("dataset ", dir.string(), " has no ",
                                            kind == MediaKind::kAudio   ? "audio files"
                                            : kind == MediaKind::kVideo ? "video files"
                                                                        : "images",
                                            " in class directories (root/<class>/<file>)"));
  }
  index->fingerprint_ = fingerprint.Finish();
  return std::shared_ptr<const ImageFolderIndex>(std::move(index));
}

absl::StatusOr<std::string> ImageFolderIndex::Read(int64_t index) const {
  return ReadFileBytes(dir_ / samples_[index].path, max_file_bytes_);
}

std::optional<SampleSource::MediaIndexHome> ImageFolderIndex::MediaIndexHomeOf(int64_t index) const {
  if (media_ != MediaKind::kVideo) return std::nullopt;
  const std::filesystem::path file = dir_ / samples_[index].path;
  const std::optional<FileStamp> stamp = StampOf(file);
  if (!stamp) return std::nullopt;
  return MediaIndexHome{file.string() + kVideoIndexSuffix, file, *stamp, stamp->size};
}

namespace {

constexpr char kStillOpeningPayload[] = "type.stoker.dev/dataset-still-opening";
// The payload's value: what the open was doing.
constexpr char kScanning[] = "scanning";
constexpr char kCopyingFromStore[] = "copying";

absl::Status StillOpening(const std::string& name, absl::Duration scanning, bool copying, const std::string& progress) {
  const std::string took = absl::FormatDuration(absl::Trunc(scanning, absl::Milliseconds(100)));
  absl::Status status = absl::UnavailableError(
      copying ? absl::StrCat("dataset '", name, "' is still being copied from its store to this server's cache (",
                             progress.empty() ? took : absl::StrCat(progress, "; opening for ", took), "); ask again")
              : absl::StrCat("dataset '", name, "' is still being opened on this server (scanning for ", took,
                             "); ask again"));
  status.SetPayload(kStillOpeningPayload, absl::Cord(copying ? kCopyingFromStore : kScanning));
  return status;
}

}  // namespace

bool IsStillOpening(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable && status.GetPayload(kStillOpeningPayload).has_value();
}

bool IsStillCopyingFromStore(const absl::Status& status) {
  if (!IsStillOpening(status)) return false;
  const auto what = status.GetPayload(kStillOpeningPayload);
  return what && *what == kCopyingFromStore;
}

DatasetCatalog::DatasetCatalog(fs::path data_root, CatalogOptions options)
    : data_root_(std::move(data_root)), options_(std::move(options)), scans_(std::max(1, options_.scan_threads)) {
  timer_ = std::thread([this] { RunTimer(); });
}

DatasetCatalog::~DatasetCatalog() {
  Stop();
  timer_.join();
}

absl::Status DatasetCatalog::StillOpeningAnswer(const Entry& entry, absl::Duration scanning) const {
  const bool copying = entry.fetching.load();
  return StillOpening(entry.name, scanning, copying,
                      copying && options_.fetch_progress ? options_.fetch_progress(entry.name) : std::string());
}

void DatasetCatalog::RunTimer() {
  mu_.Lock();
  while (!stopped_.load()) {
    absl::Time next = absl::InfiniteFuture();
    for (auto& [key, entry] : entries_) {
      for (const Entry::Waiter& w : entry->waiters) next = std::min(next, w.deadline);
    }
    timer_wake_ = false;
    mu_.AwaitWithDeadline(absl::Condition(&timer_wake_), next);
    const absl::Time now = absl::Now();
    struct Expired {
      Done done;
      std::shared_ptr<const Entry> entry;
      absl::Duration opening;
    };
    std::vector<Expired> expired;
    for (auto& [key, entry] : entries_) {
      auto& ws = entry->waiters;
      for (auto it = ws.begin(); it != ws.end();) {
        if (it->deadline > now) {
          ++it;
          continue;
        }
        expired.push_back({std::move(it->done), entry, now - entry->started});
        it = ws.erase(it);
      }
    }
    if (expired.empty()) continue;
    mu_.Unlock();
    // The answers are made here, without the lock: a copy's progress comes
    // from the store's mirror, whose lock is held while it evicts files. The
    // status is moved, not copied: the caller gets the only reference to it
    // (absl's reference count is not visible to ThreadSanitizer, which took
    // this thread's later release of a shared copy for a race).
    for (Expired& e : expired) e.done(StillOpeningAnswer(*e.entry, e.opening));
    mu_.Lock();
  }
  mu_.Unlock();
}

int DatasetCatalog::size() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(entries_.size());
}

void DatasetCatalog::OpenAsync(const std::string& name, Done done, absl::Duration patience,
                               const std::string& annotations) {
  std::string key = name;
  std::string annotations_path;
  if (!annotations.empty()) {
    auto file = ResolveUnderRoot(data_root_, annotations, "annotations", /*directory=*/false, !options_.fetch);
    if (!file.ok()) return done(file.status());
    annotations_path = file->string();
  }
  if (absl::StartsWith(name, kSyntheticPrefix)) {
    if (!annotations.empty()) {  // its "directory" would be the server's working directory
      return done(absl::InvalidArgumentError(
          absl::StrCat("dataset '", name, "' is synthetic and has no image files for annotations '", annotations,
                       "'; give the directory of the images under --data-root")));
    }
    if (!options_.allow_synthetic) {
      return done(absl::PermissionDeniedError(
          absl::StrCat("dataset '", name, "': synthetic datasets are turned off on this server (--allow-synthetic)")));
    }
  } else {
    auto dir = ResolveUnderRoot(data_root_, name, "dataset", /*directory=*/true, !options_.fetch);
    if (!dir.ok()) return done(dir.status());
    key = dir->string();
  }
  if (!annotations_path.empty()) absl::StrAppend(&key, "\n", annotations_path);  // images + annotations: one source
  std::optional<SourceOrError> answer;  // known now: given to `done` once the lock is released
  std::shared_ptr<Entry> scan;          // a first open: scanned once the lock is released
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && !it->second->opening) {
      it->second->last_used = ++clock_;
      answer = it->second->source;
    } else if (stopped_.load()) {
      answer = absl::UnavailableError(absl::StrCat("dataset '", name, "': this server is shutting down"));
    } else {
      std::shared_ptr<Entry> entry = it != entries_.end() ? it->second : nullptr;  // someone is opening it
      if (!entry) {
        scan = entry = std::make_shared<Entry>();
        entry->name = name;
        entry->annotations = annotations_path;
        entry->started = absl::Now();
        // Copied from a remote store first: said so from the first answer.
        entry->fetching.store(options_.fetch && !absl::StartsWith(name, kSyntheticPrefix));
        entries_[key] = entry;
      }
      const absl::Time deadline =
          patience == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + patience;
      entry->waiters.push_back({std::move(done), deadline});
      if (deadline != absl::InfiniteFuture()) timer_wake_ = true;
    }
  }
  if (answer) return done(*std::move(answer));
  if (!scan) return;  // waits for the scan under way
  LOG(INFO) << "opening dataset '" << name << "' (" << key << ")";
  scans_.Schedule([this, name, key, scan] { Scan(name, key, scan); });
}

SourceOrError DatasetCatalog::Open(const std::string& name) {
  return Await<SourceOrError>([&](Done done) { OpenAsync(name, std::move(done)); });
}

void DatasetCatalog::Stop() {
  std::vector<std::pair<std::string, Done>> waiters;
  {
    absl::MutexLock lock(&mu_);
    stopped_.store(true);
    timer_wake_ = true;
    for (auto& [key, entry] : entries_) {
      for (Entry::Waiter& w : entry->waiters) waiters.emplace_back(entry->name, std::move(w.done));
      entry->waiters.clear();
    }
  }
  for (auto& [name, done] : waiters) {
    done(
        absl::UnavailableError(absl::StrCat("dataset '", name, "' was still being opened when this server shut down")));
  }
}

void DatasetCatalog::Scan(std::string name, std::string key, std::shared_ptr<Entry> entry) {
  const absl::Time start = absl::Now();
  SourceOrError source =
      stopped_.load() ? absl::UnavailableError("this server is shutting down") : OpenUncached(name, key, *entry);
  const absl::Duration took = absl::Now() - start;
  if (source.ok()) {
    LOG(INFO) << "opened dataset '" << name << "': " << (*source)->size() << " samples in "
              << (*source)->class_names().size() << " classes, " << absl::FormatDuration(took);
  } else {
    LOG(WARNING) << "cannot open dataset '" << name << "': " << source.status();
  }
  std::vector<Entry::Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    entry->opening = false;
    waiters.swap(entry->waiters);
    auto it = entries_.find(key);
    if (!source.ok()) {
      // Waiters see the error; the entry goes, so a later call tries again.
      entry->status = source.status();
      if (it != entries_.end() && it->second == entry) entries_.erase(it);
    } else {
      entry->source = *source;
      entry->last_used = ++clock_;
      EvictLocked();
    }
  }
  // The last waiter gets this thread's reference, so that none is left here
  // once the waiters have it: a caller that opens the next dataset at once
  // must find this one evictable (no reference but the catalog's).
  for (size_t i = 0; i < waiters.size(); ++i) {
    if (i + 1 < waiters.size()) {
      waiters[i].done(source);
    } else {
      waiters[i].done(std::move(source));
    }
  }
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

SourceOrError DatasetCatalog::OpenUncached(const std::string& name, const std::string& key, Entry& entry) {
  const std::string& annotations = entry.annotations;
  if (options_.fetch && !absl::StartsWith(name, kSyntheticPrefix)) {  // a remote store: its local copy first
    entry.fetching.store(true);
    absl::Status fetched = options_.fetch(name, /*directory=*/true, &stopped_);
    if (fetched.ok() && !annotations.empty()) {
      std::error_code ec;
      const std::string relative = fs::relative(annotations, fs::canonical(data_root_, ec), ec).generic_string();
      fetched = options_.fetch(relative, /*directory=*/false, &stopped_);
    }
    entry.fetching.store(false);
    if (!fetched.ok()) return fetched;
    auto dir = ResolveDatasetDir(data_root_, name);  // the copy is checked as a local dataset is
    if (!dir.ok()) return dir.status();
  }
  if (options_.opener) return options_.opener(name, key, &stopped_);
  if (!annotations.empty()) {
    const fs::path dir = key.substr(0, key.find('\n'));
    auto s = CocoSource::Open(dir, annotations, options_.max_file_bytes, options_.max_annotation_bytes, &stopped_,
                              data_root_);
    if (!s.ok()) return s.status();
    LOG(INFO) << "dataset '" << name << "' with annotations " << annotations << ": " << (*s)->size() << " images, "
              << (*s)->class_names().size() << " categories";
    return std::shared_ptr<const SampleSource>(*std::move(s));
  }
  if (absl::StartsWith(name, kSyntheticPrefix)) {
    auto s = SyntheticSource::Open(name);
    if (!s.ok()) return s.status();
    return std::shared_ptr<const SampleSource>(*std::move(s));
  }
  const fs::path dir(key);
  // A remote dataset's shards that stay in the store (fetched when read).
  StreamedShards streamed;
  if (options_.streamed && !absl::StartsWith(name, kSyntheticPrefix)) streamed = options_.streamed(name);
  const StreamedShards* remote = streamed.shards.empty() ? nullptr : &streamed;
  if (HasManifest(dir)) {  // a materialised dataset: its manifest says which shards
    auto s = MaterializedSource::Open(dir, options_.max_file_bytes, &stopped_, remote);
    if (!s.ok()) return s.status();
    return std::shared_ptr<const SampleSource>(*std::move(s));
  }
  if (IsSegmentationLayout(dir)) {
    auto s = SegmentationSource::Open(dir, data_root_, options_.max_file_bytes, &stopped_);
    if (!s.ok()) return s.status();
    return std::shared_ptr<const SampleSource>(*std::move(s));
  }
  if (HasTarShards(dir) || remote != nullptr) {
    auto s = TarShardSource::Open(dir, options_.max_file_bytes, &stopped_, nullptr, MediaKind::kImage, remote);
    if (absl::IsNotFound(s.status())) {  // no images: shards of audio or video samples?
      for (const MediaKind kind : {MediaKind::kAudio, MediaKind::kVideo}) {
        auto a = TarShardSource::Open(dir, options_.max_file_bytes, &stopped_, nullptr, kind, remote);
        if (a.ok()) {
          LOG(INFO) << "dataset '" << name << "': " << (*a)->size() << " samples with "
                    << (kind == MediaKind::kAudio ? "an audio" : "a video") << " member in tar shards";
          return std::shared_ptr<const SampleSource>(*std::move(a));
        }
        if (!absl::IsNotFound(a.status())) return a.status();
      }
      s = absl::NotFoundError(absl::StrCat("dataset ", dir.string(),
                                           " has tar shards but no samples with an image, an audio or a video member"));
    }
    std::error_code ec;
    if (absl::IsNotFound(s.status()) && fs::is_regular_file(dir / kManifestFileName, ec)) {
      // Most likely a materialised dataset whose manifest was damaged into
      // other valid JSON (an array, another kind): say so, not "no images".
      return absl::DataLossError(absl::StrCat(s.status().message(), "; its ", kManifestFileName,
                                              " is not a Stoker manifest (not a JSON object whose "
                                              "\"kind\" is \"",
                                              kManifestKind,
                                              "\"): if this is a materialised dataset, its manifest is damaged"));
    }
    if (!s.ok()) return s.status();
    return std::shared_ptr<const SampleSource>(*std::move(s));
  }
  auto s = ImageFolderIndex::Scan(dir, data_root_, options_.max_file_bytes, &stopped_);
  std::error_code dir_ec;
  if (absl::IsNotFound(s.status()) && fs::is_directory(dir, dir_ec)) {  // no images: a tree of audio or video clips?
    for (const MediaKind kind : {MediaKind::kAudio, MediaKind::kVideo}) {
      auto a = ImageFolderIndex::Scan(dir, data_root_, options_.max_file_bytes, &stopped_, kind);
      if (a.ok()) {
        LOG(INFO) << "dataset '" << name << "': " << (*a)->size() << (kind == MediaKind::kAudio ? " audio" : " video")
                  << " files in " << (*a)->class_names().size() << " classes";
        return std::shared_ptr<const SampleSource>(*std::move(a));
      }
      if (!absl::IsNotFound(a.status())) return a.status();
    }
    return absl::NotFoundError(absl::StrCat(
        "dataset ", dir.string(), " has no images, audio or video files in class directories (root/<class>/<file>)"));
  }
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
