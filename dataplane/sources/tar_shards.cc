#include "dataplane/sources/tar_shards.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/video_index_cache.h"
#include "dataplane/sources/dataset.h"
#include "dataplane/sources/tar_index.h"
#include "glog/logging.h"

namespace stoker {
namespace fs = std::filesystem;
using tar_index::BuildIndex;
using tar_index::ExtensionTable;
using tar_index::kAudioMembers;
using tar_index::kBuiltHereSuffix;
using tar_index::kIndexSuffix;
using tar_index::kVideoMembers;
using tar_index::ListShards;
using tar_index::LoadSidecar;
using tar_index::LogIndexProblems;
using tar_index::ReadAt;
using tar_index::SaveSidecar;
using tar_index::ShardIndex;
using tar_index::SidecarPath;

bool HasTarShards(const fs::path& dir) { return !ListShards(dir).empty(); }

absl::StatusOr<std::shared_ptr<const TarShardSource>> TarShardSource::Open(const fs::path& dir, int64_t max_file_bytes,
                                                                           const std::atomic<bool>* cancelled,
                                                                           const ShardSelection* selection,
                                                                           MediaKind media,
                                                                           const StreamedShards* streamed) {
  std::shared_ptr<TarShardSource> source(new TarShardSource());
  source->max_file_bytes_ = max_file_bytes;
  source->media_ = media;
  source->image_field_ = selection != nullptr         ? selection->image_field
                         : media == MediaKind::kAudio ? kAudioMembers
                         : media == MediaKind::kVideo ? kVideoMembers
                                                      : "";
  std::map<std::string, ObjectInfo> remote;  // streamed shards by file name
  if (streamed != nullptr) {
    source->hold_ = streamed->hold;
    source->prefetch_ = streamed->prefetch;
    for (const ObjectInfo& o : streamed->shards) remote[fs::path(o.key).filename().string()] = o;
  }
  source->ChooseShards(dir, selection, remote);
  int32_t max_label = -1;
  int64_t bad_labels = 0;
  ExtensionTable table(&source->extension_names_);
  for (size_t i = 0; i < source->shard_paths_.size(); ++i) {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return absl::CancelledError(absl::StrCat("opening ", dir.string(), " cancelled"));
    }
    auto in_store = remote.find(source->shard_paths_[i].filename().string());
    absl::StatusOr<ShardIndex> index =
        source->IndexShard(i, in_store == remote.end() ? nullptr : &in_store->second, cancelled);
    if (!index.ok()) return index.status();
    bad_labels += index->bad_labels;
    source->AddSamples(i, *std::move(index), table, &max_label);
  }
  if (absl::Status s = source->Finish(dir, max_label, bad_labels); !s.ok()) return s;
  return std::shared_ptr<const TarShardSource>(std::move(source));
}

void TarShardSource::ChooseShards(const fs::path& dir, const ShardSelection* selection,
                                  const std::map<std::string, ObjectInfo>& remote) {
  if (selection != nullptr) {
    for (const std::string& name : selection->shards) shard_paths_.push_back(dir / name);
  } else {
    shard_paths_ = ListShards(dir);
    shard_paths_.erase(std::remove_if(shard_paths_.begin(), shard_paths_.end(),
                                      [&](const fs::path& p) { return remote.count(p.filename().string()); }),
                       shard_paths_.end());
    for (const auto& [name, o] : remote) shard_paths_.push_back(dir / name);
    std::sort(shard_paths_.begin(), shard_paths_.end());
  }
  // Streamed shards that no sidecar indexes are fetched to be indexed: all
  // of them start coming now (the read-ahead), not one after another.
  if (prefetch_) {
    for (const fs::path& shard : shard_paths_) {
      auto in_store = remote.find(shard.filename().string());
      if (in_store == remote.end()) continue;
      std::error_code ec;
      if (!fs::exists(SidecarPath(shard, image_field_) + kBuiltHereSuffix, ec) &&
          !fs::exists(SidecarPath(shard, image_field_), ec)) {
        prefetch_(in_store->second.key);
      }
    }
  }
}

absl::StatusOr<ShardIndex> TarShardSource::IndexShard(size_t i, const ObjectInfo* in_store,
                                                      const std::atomic<bool>* cancelled) {
  const fs::path& shard = shard_paths_[i];
  const std::string& image_field = image_field_;
  const bool is_streamed = in_store != nullptr;
  struct stat st {};
  if (is_streamed) {  // its stamp is the store's object's
    fds_.push_back(-1);
    objects_.push_back(*in_store);
    st.st_size = in_store->size;
    st.st_mtim.tv_sec = in_store->mtime_ns / 1'000'000'000;
    st.st_mtim.tv_nsec = in_store->mtime_ns % 1'000'000'000;
  } else {
    const int fd = open(shard.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open shard ", shard.string()));
    fds_.push_back(fd);
    objects_.emplace_back();
    fstat(fd, &st);
  }
  shard_stamps_.push_back(StampOf(st));
  ShardIndex index;
  std::optional<absl::Status> checked;  // a streamed shard indexed from its own bytes needs no check
  // A streamed shard's index: one built here for this version (size and
  // time), else the store's sidecar (checked at the first read), else built.
  const bool loaded = is_streamed ? LoadSidecar(shard, st, image_field, &index, false, kBuiltHereSuffix) ||
                                        (index = ShardIndex(), LoadSidecar(shard, st, image_field, &index, true))
                                  : LoadSidecar(shard, st, image_field, &index);
  if (!loaded) {
    index = ShardIndex();
    std::shared_ptr<const HeldObject> held;
    absl::StatusOr<int> fd = fds_.back();
    if (is_streamed) {  // no sidecar in the store: the shard is fetched once to index it
      absl::StatusOr<std::shared_ptr<const HeldObject>> h = hold_(in_store->key, cancelled);
      if (!h.ok()) return h.status();
      held = *std::move(h);
      fd = held->fd();
      checked = absl::OkStatus();
    }
    absl::StatusOr<ShardIndex> built = BuildIndex(shard, *fd, image_field);
    if (!built.ok()) return built.status();
    index = *std::move(built);
    SaveSidecar(shard, st, image_field, index, is_streamed ? kBuiltHereSuffix : "");
  }
  {
    absl::MutexLock lock(&checked_mu_);  // not shared yet; the lock keeps the analysis whole
    checked_.push_back(checked);
  }
  return index;
}

void TarShardSource::AddSamples(size_t i, ShardIndex index, ExtensionTable& table, int32_t* max_label) {
  const fs::path& shard = shard_paths_[i];
  shard_damage_.push_back(index.damage);
  first_sample_.push_back(static_cast<int64_t>(samples_.size()));
  LogIndexProblems(shard.filename().string(), index);
  std::vector<int32_t> ids;  // the shard's extension ids in the source's table
  for (const std::string& ext : index.extensions) ids.push_back(table.Id(ext));
  for (Sample& s : index.samples) {
    for (Member& m : s.members) m.extension = ids[static_cast<size_t>(m.extension)];
    if (!s.labeled) ++unlabeled_;
  }
  if (!index.damage.empty()) {
    const std::string what = absl::StrCat(shard.filename().string(), ": ", index.damage);
    LOG(WARNING) << "shard " << what << "; the " << index.samples.size() << " samples before it are used";
    damage_.push_back(what);
  }
  for (Sample& s : index.samples) {
    s.shard = static_cast<int32_t>(i);
    *max_label = std::max(*max_label, s.label);
    samples_.push_back(std::move(s));
  }
}

absl::Status TarShardSource::Finish(const fs::path& dir, int32_t max_label, int64_t bad_labels) {
  const char* what = media_ == MediaKind::kAudio   ? "an audio member"
                     : media_ == MediaKind::kVideo ? "a video member"
                                                   : "an image";
  if (samples_.empty() && bad_labels > 0) {
    return absl::DataLossError(absl::StrCat("dataset ", dir.string(), ": every sample with ", what, " (", bad_labels,
                                            ") has a .cls label outside 0..", kMaxClasses - 1));
  }
  if (samples_.empty()) {
    return absl::NotFoundError(absl::StrCat("dataset ", dir.string(), " has tar shards but no samples with ", what));
  }
  if (unlabeled_ > 0) {
    LOG(WARNING) << "dataset " << dir.string() << ": " << unlabeled_ << " of " << samples_.size()
                 << " samples have no class label (no .cls member, or one that is not an integer): those without "
                    "a .cls are served with label 0 in (images, labels) batches and a class field fails them as "
                    "missing_field; those whose .cls is not an integer fail as bad_field";
  }
  first_sample_.push_back(static_cast<int64_t>(samples_.size()));
  for (int32_t l = 0; l <= max_label; ++l) class_names_.push_back(std::to_string(l));
  FingerprintBuilder fingerprint;
  for (const fs::path& p : shard_paths_) fingerprint.Add(p.filename().string());
  for (const Sample& s : samples_) fingerprint.Add(s.shard).Add(s.key).Add(s.size).Add(s.label);
  fingerprint_ = fingerprint.Finish();
  return absl::OkStatus();
}

absl::StatusOr<std::string> TarShardSource::ReadField(int64_t index, const std::vector<std::string>& extensions,
                                                      std::string* which, int64_t max_bytes) const {
  const Sample& s = samples_[index];
  for (const std::string& ext : extensions) {
    for (const Member& m : s.members) {
      if (extension_names_[static_cast<size_t>(m.extension)] != ext) continue;
      if (which != nullptr) *which = ext;
      if (max_bytes > 0 && m.size > max_bytes) {
        return DecodeError(DecodeFailure::kTooLarge,
                           absl::StrCat(Describe(index), ".", ext, " holds ", m.size,
                                        " bytes; the session's max_field_bytes is ", max_bytes));
      }
      return ReadRange(index, ext, m.offset, m.size);
    }
  }
  std::vector<std::string> present;
  for (const Member& m : s.members) present.push_back(extension_names_[static_cast<size_t>(m.extension)]);
  return DecodeError(DecodeFailure::kMissingField,
                     absl::StrCat(Describe(index), " has no member ", absl::StrJoin(extensions, " or "), " (it has ",
                                  absl::StrJoin(present, ", "), ")"));
}

std::vector<std::string> TarShardSource::FieldMembers(int64_t index) const {
  const Sample& s = samples_[index];
  std::vector<std::string> names;
  for (const Member& m : s.members) {
    const std::string& ext = extension_names_[static_cast<size_t>(m.extension)];
    if (m.offset == s.offset || ext == "cls") continue;  // the image and the label
    names.push_back(ext);
  }
  return names;
}

absl::StatusOr<std::string> TarShardSource::ReadRange(int64_t index, const std::string& ext, int64_t offset,
                                                      int64_t size) const {
  const std::string where = ext.empty() ? Describe(index) : absl::StrCat(Describe(index), ".", ext);
  if (max_file_bytes_ > 0 && size > max_file_bytes_) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat(where, " holds ", size, " bytes; --max-file-bytes is ", max_file_bytes_));
  }
  std::shared_ptr<const HeldObject> held;
  absl::StatusOr<int> fd = ShardFd(samples_[index].shard, &held);
  if (!fd.ok()) return absl::Status(fd.status().code(), absl::StrCat(where, ": ", fd.status().message()));
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!ReadAt(*fd, bytes.data(), size, offset)) {
    return absl::DataLossError(absl::StrCat("short read of ", where, " at offset ", offset));
  }
  return bytes;
}

absl::StatusOr<int> TarShardSource::ShardFd(int32_t shard, std::shared_ptr<const HeldObject>* held) const {
  if (fds_[shard] >= 0) return fds_[shard];
  const ObjectInfo& object = objects_[shard];
  absl::StatusOr<std::shared_ptr<const HeldObject>> h = hold_(object.key, nullptr);
  if (!h.ok()) return h.status();
  *held = *std::move(h);
  absl::MutexLock lock(&checked_mu_);
  std::optional<absl::Status>& checked = checked_[shard];
  if (!checked) {  // the first read in this process: does the index describe these bytes?
    absl::StatusOr<ShardIndex> built = BuildIndex(shard_paths_[shard], (*held)->fd(), image_field_);
    bool same = built.ok() && built->damage == shard_damage_[shard] &&
                static_cast<int64_t>(built->samples.size()) == first_sample_[shard + 1] - first_sample_[shard];
    for (size_t i = 0; same && i < built->samples.size(); ++i) {
      const Sample& a = built->samples[i];
      const Sample& b = samples_[first_sample_[shard] + static_cast<int64_t>(i)];
      same = a.key == b.key && a.offset == b.offset && a.size == b.size && a.label == b.label &&
             a.labeled == b.labeled && a.label_unreadable == b.label_unreadable && a.members.size() == b.members.size();
      for (size_t m = 0; same && m < a.members.size(); ++m) {
        same = a.members[m].offset == b.members[m].offset && a.members[m].size == b.members[m].size &&
               built->extensions[static_cast<size_t>(a.members[m].extension)] ==
                   extension_names_[static_cast<size_t>(b.members[m].extension)];
      }
    }
    checked = same ? absl::OkStatus()
                   : absl::DataLossError(absl::StrCat(
                         "shard ", shard_paths_[shard].filename().string(), " (", object.key,
                         ") does not match its index (the sidecar beside it in the store was made for other bytes, or "
                         "the shard changed): its samples fail until the dataset is indexed again (remove the stale ",
                         shard_paths_[shard].filename().string(), kIndexSuffix, " from the store)"));
    if (!same) {
      LOG(ERROR) << checked->message();
      // An index built here for other bytes (a store without modification
      // times) is not loaded again: the next open builds it afresh.
      std::error_code ec;
      fs::remove(SidecarPath(shard_paths_[shard], image_field_) + kBuiltHereSuffix, ec);
    }
  }
  if (!checked->ok()) return *checked;
  return (*held)->fd();
}

void TarShardSource::WillRead(const int64_t* indices, int64_t n) const {
  if (!prefetch_) return;
  std::set<int32_t> shards;  // each once (a batch in the global order spans many)
  for (int64_t i = 0; i < n; ++i) {
    const int32_t shard = samples_[indices[i]].shard;
    if (fds_[shard] < 0) shards.insert(shard);
  }
  for (int32_t shard : shards) prefetch_(objects_[shard].key);
}

TarShardSource::~TarShardSource() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

std::string TarShardSource::Describe(int64_t index) const {
  const Sample& s = samples_[index];
  return absl::StrCat(shard_paths_[s.shard].filename().string(), ":", s.key);
}

absl::Status TarShardSource::LabelStatus(int64_t index) const {
  if (!samples_[index].label_unreadable) return absl::OkStatus();
  std::string which;
  absl::StatusOr<std::string> text = ReadField(index, {"cls"}, &which, /*max_bytes=*/63);
  const std::string shown = text.ok() ? absl::StrCat("'", absl::CHexEscape(*text), "'") : "over 63 bytes";
  return DecodeError(DecodeFailure::kBadField,
                     absl::StrCat(Describe(index), ".cls holds ", shown, ", not an integer class label"));
}

absl::StatusOr<std::string> TarShardSource::Read(int64_t index) const {
  const Sample& s = samples_[index];
  return ReadRange(index, "", s.offset, s.size);
}

std::optional<SampleSource::MediaIndexHome> TarShardSource::MediaIndexHomeOf(int64_t index) const {
  // A streamed shard's frame index is not kept: the shard is not here.
  if (media_ != MediaKind::kVideo || fds_[samples_[index].shard] < 0) return std::nullopt;
  const Sample& s = samples_[index];
  const fs::path& shard = shard_paths_[s.shard];
  return MediaIndexHome{fs::path(shard.string() + kVideoIndexFolderSuffix) / std::to_string(s.offset), shard,
                        shard_stamps_[s.shard], s.size};
}

std::vector<int64_t> TarShardSource::ShardSizes() const {
  std::vector<int64_t> sizes;  // samples are numbered shard by shard
  int32_t shard = -1;
  for (const Sample& sample : samples_) {
    if (sizes.empty() || sample.shard != shard) sizes.push_back(0);
    shard = sample.shard;
    ++sizes.back();
  }
  return sizes;
}

}  // namespace stoker
