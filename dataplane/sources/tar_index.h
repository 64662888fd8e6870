// tar_shards' index, internal to sources/: how a shard's members become
// samples (BuildIndex over ScanTar), the sidecar that keeps that index beside
// the shard (its format is versioned: a sidecar of another version, another
// size or time, or another member kind is rebuilt), and the shard files of a
// folder. Used by tar_shards.cc and its tests only. Value types and functions
// of the file system; thread-compatible.
#ifndef STOKER_DATAPLANE_SOURCES_TAR_INDEX_H_
#define STOKER_DATAPLANE_SOURCES_TAR_INDEX_H_

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/sources/tar_shards.h"

namespace stoker {
namespace tar_index {

constexpr char kIndexSuffix[] = ".stoker-index";
// Where an index built here from a streamed shard's bytes is kept (beside
// the sidecar the store may hold, which it never replaces).
constexpr char kBuiltHereSuffix[] = ".here";
// The sample's member: `wanted` empty, any of the image extensions;
// kAudioMembers or kVideoMembers, any audio or video extension
// (decode/file_kinds.h); else exactly that field.
constexpr char kAudioMembers[] = "@audio";
constexpr char kVideoMembers[] = "@video";
bool IsImageField(const std::string& field, const std::string& wanted);

// pread until `size` bytes are in, or false.
bool ReadAt(int fd, void* buf, int64_t size, int64_t offset);

struct ShardIndex {
  std::vector<TarShardSource::Sample> samples;  // Member::extension indexes `extensions`
  std::vector<std::string> extensions;
  std::string damage;
  int64_t bad_labels = 0;       // samples left out: a .cls beyond kMaxClasses
  int64_t unparsed_labels = 0;  // a .cls that is not an integer: a bad sample where labels are served
  int64_t duplicates = 0;       // members whose key and extension came before
  std::string first_duplicate;
  int64_t skipped = 0;  // members ScanTar left out
  std::string first_skipped;
};

// Interns extensions into one table.
class ExtensionTable {
 public:
  explicit ExtensionTable(std::vector<std::string>* names) : names_(names) {
    for (size_t i = 0; i < names_->size(); ++i) ids_.emplace((*names_)[i], static_cast<int32_t>(i));
  }
  int32_t Id(const std::string& ext) {
    auto [it, inserted] = ids_.emplace(ext, static_cast<int32_t>(names_->size()));
    if (inserted) names_->push_back(ext);
    return it->second;
  }

 private:
  std::vector<std::string>* names_;
  std::map<std::string, int32_t> ids_;
};

// Each kind of member keeps its own sidecar, so that a dataset opened for
// images first (and found to have none) does not rebuild the other's.
std::string SidecarPath(const std::filesystem::path& shard, const std::string& image_field);

// The shard's samples (ScanTar's members grouped by key, the sample's member
// chosen by `image_field`, .cls labels read).
absl::StatusOr<ShardIndex> BuildIndex(const std::filesystem::path& shard, int fd, const std::string& image_field);
// The sidecar (at SidecarPath + suffix) into `index` when its header matches
// `st` (with `any_mtime`, whatever time it names); false when it is missing,
// stale or unreadable.
bool LoadSidecar(const std::filesystem::path& shard, const struct stat& st, const std::string& image_field,
                 ShardIndex* index, bool any_mtime = false, const char* suffix = "");
// Writes the sidecar (atomically; a folder it cannot write to is skipped).
void SaveSidecar(const std::filesystem::path& shard, const struct stat& st, const std::string& image_field,
                 const ShardIndex& index, const char* suffix = "");
// The index's problems (labels left out, duplicates, skipped members) as warnings.
void LogIndexProblems(const std::string& shard, const ShardIndex& index);
// The *.tar files directly in `dir`, sorted; the non-throwing filesystem
// calls only (an unreadable entry is skipped, never an exception).
std::vector<std::filesystem::path> ListShards(const std::filesystem::path& dir);

}  // namespace tar_index
}  // namespace stoker

#endif  // STOKER_DATAPLANE_SOURCES_TAR_INDEX_H_
