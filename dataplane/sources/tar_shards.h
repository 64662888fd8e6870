// WebDataset-style tar shards as a sample source: a directory of
// name-000000.tar, name-000001.tar, ... whose members are grouped into samples
// by key (the member path up to the first '.' of its file name); the rest of
// the name is the field: .jpg/.jpeg/.png/.webp is the image, .cls the integer
// label; every member is indexed, so a session may ask for any of them as a
// field (ReadField). Samples are numbered over all shards in
// shard-name order, then tar order, so an epoch's order spans every shard.
//
// Random access needs each member's offset: the first open of a shard scans
// its headers and, when the directory is writable, keeps the index in a
// sidecar file (<shard>.stoker-index) that is rebuilt when the shard's size
// or modification time changes. A malformed or truncated shard is reported
// with its name and the byte offset of the damage; the samples before the
// damage stay usable. Thread-safe after Open (reads use pread).
//
// Streamed shards (a remote store's shards that stay there: StoreMirror's
// Hold) are read through a held local copy, fetched when a read needs it.
// Their index comes from the sidecar beside them in the store (the one a
// local open wrote, uploaded with the shards; its modification time is not
// compared) or, without one, from the shard itself, fetched once at open;
// the first read of a shard in a process checks its index against the bytes
// fetched, and a shard that no longer matches fails its samples (DATA_LOSS
// naming it) instead of serving other bytes.
#ifndef STOKER_DATAPLANE_SOURCES_TAR_SHARDS_H_
#define STOKER_DATAPLANE_SOURCES_TAR_SHARDS_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dataplane/sample/sample_source.h"
#include "storage/held_object.h"

namespace stoker {
namespace tar_index {
struct ShardIndex;
class ExtensionTable;
}  // namespace tar_index

struct TarMember {
  std::string name;
  int64_t offset = 0;  // of the data, from the start of the file
  int64_t size = 0;
};

// Member names longer than this many bytes are skipped (and counted): a
// WebDataset key is short, and a shard of huge names must not make an index
// of gigabytes. Load-bearing: documented in the README's bad-input table.
inline constexpr int64_t kMaxTarMemberName = 1024;
// GNU long-name and pax records longer than this are skipped with the member
// they describe.
inline constexpr int64_t kMaxTarRecordBytes = int64_t{1} << 20;
// Members one sample (key) may have; more are skipped and counted.
inline constexpr int64_t kMaxMembersPerSample = 256;

struct TarScan {
  std::vector<TarMember> members;  // regular files, in order
  std::string damage;              // empty, or what is wrong and where
  // Members left out (a name over kMaxTarMemberName, a record over
  // kMaxTarRecordBytes): how many, and what the first one was.
  int64_t skipped = 0;
  std::string first_skipped;
};

// Reads a tar file's headers (ustar, GNU long names, pax path/size records).
// NOT_FOUND if the file cannot be opened; damage is reported in the result.
// `fd` (when >= 0): read that open file (`path` names it in messages).
absl::StatusOr<TarScan> ScanTar(const std::filesystem::path& path, int fd = -1);

// True when `dir` holds at least one regular file named *.tar.
bool HasTarShards(const std::filesystem::path& dir);

// Which shards of a directory make the source, and which member is the
// sample (a materialised dataset's manifest says both).
struct ShardSelection {
  std::vector<std::string> shards;  // file names in the directory, in order
  std::string image_field;          // e.g. "npy.zst"; empty: jpg, jpeg, png, webp
};

class TarShardSource final : public SampleSource {
 public:
  // Labels are 0..kMaxClasses-1; a sample whose .cls is outside is left out
  // (and logged), so that no shard can make a session list billions of classes.
  static constexpr int64_t kMaxClasses = 1'000'000;

  // Opens every *.tar in `dir`. NOT_FOUND when no shard has a sample. Reads
  // of members larger than `max_file_bytes` (0: no limit) fail as too_large.
  // CANCELLED between shards once `*cancelled` (when given) turns true.
  // `selection` (when given) names the shards and the sample's field.
  // `media` kAudio or kVideo: the sample is its member with an audio or
  // video extension (AudioExtensions(), VideoExtensions() in dataset.h, the
  // first in tar order), read by audio(...) or video_clip(...) pipelines;
  // the other members are its fields, as an image sample's are.
  // `streamed` (when given): the shards are these, read through held copies.
  static absl::StatusOr<std::shared_ptr<const TarShardSource>> Open(const std::filesystem::path& dir,
                                                                    int64_t max_file_bytes = 0,
                                                                    const std::atomic<bool>* cancelled = nullptr,
                                                                    const ShardSelection* selection = nullptr,
                                                                    MediaKind media = MediaKind::kImage,
                                                                    const StreamedShards* streamed = nullptr);
  ~TarShardSource() override;

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  // Samples per tar shard (shards without samples left out).
  std::vector<int64_t> ShardSizes() const override;
  const std::vector<std::string>& class_names() const override { return class_names_; }
  int32_t label(int64_t index) const override { return samples_[index].label; }
  std::string Describe(int64_t index) const override;
  absl::StatusOr<std::string> Read(int64_t index) const override;
  const std::string& fingerprint() const override { return fingerprint_; }
  bool has_members() const override { return true; }
  MediaKind media() const override { return media_; }
  absl::StatusOr<std::string> ReadField(int64_t index, const std::vector<std::string>& extensions, std::string* which,
                                        int64_t max_bytes = 0) const override;
  std::vector<std::string> FieldMembers(int64_t index) const override;
  // Videos: <shard>.stoker-index-frames/<offset of the member's data>.
  std::optional<MediaIndexHome> MediaIndexHomeOf(int64_t index) const override;
  // Streamed shards: starts fetching those of these samples (read-ahead).
  void WillRead(const int64_t* indices, int64_t n) const override;
  int64_t unlabeled_samples() const override { return unlabeled_; }
  absl::Status LabelStatus(int64_t index) const override;
  // The member extensions present in the dataset, sorted (for messages).
  std::vector<std::string> extensions() const { return extension_names_; }

  // What was wrong with each damaged shard ("shard: damage"), for logs/tests.
  const std::vector<std::string>& damage() const { return damage_; }

  // One member of a sample: its extension (an index into the source's
  // table of extensions) and where its data is.
  struct Member {
    int32_t extension = 0;
    int64_t offset = 0;
    int64_t size = 0;
  };
  struct Sample {
    int32_t shard = 0;
    std::string key;
    int64_t offset = 0;  // of the image member's data
    int64_t size = 0;
    int32_t label = 0;              // 0 when unlabeled
    bool labeled = false;           // has a .cls member with a valid label
    bool label_unreadable = false;  // has a .cls member that is not an integer
    std::vector<Member> members;    // every member, in tar order
  };

 private:
  TarShardSource() = default;
  // Open's steps: the shards (the selection's, else the folder's and the
  // streamed ones, sorted; the streamed ones without a sidecar fetched ahead);
  // shard i opened (or its object's stamp taken) and indexed (its sidecar, or
  // built and saved); its samples appended under the source's extension
  // table; the empty-source errors, class names and fingerprint.
  void ChooseShards(const std::filesystem::path& dir, const ShardSelection* selection,
                    const std::map<std::string, ObjectInfo>& remote);
  absl::StatusOr<tar_index::ShardIndex> IndexShard(size_t i, const ObjectInfo* in_store,
                                                   const std::atomic<bool>* cancelled);
  void AddSamples(size_t i, tar_index::ShardIndex index, tar_index::ExtensionTable& table, int32_t* max_label);
  absl::Status Finish(const std::filesystem::path& dir, int32_t max_label, int64_t bad_labels);
  // Bytes [offset, offset + size) of sample `index`'s shard; `ext` names the
  // member in errors ("": the image).
  absl::StatusOr<std::string> ReadRange(int64_t index, const std::string& ext, int64_t offset, int64_t size) const;

  // The fd to read shard `shard` from: its own, or a held copy's (*held
  // keeps it) whose index has been checked against its bytes.
  absl::StatusOr<int> ShardFd(int32_t shard, std::shared_ptr<const HeldObject>* held) const;

  int64_t max_file_bytes_ = 0;
  MediaKind media_ = MediaKind::kImage;
  std::string image_field_;
  std::string fingerprint_;
  std::vector<std::filesystem::path> shard_paths_;
  std::vector<int> fds_;  // open shard files, closed on destruction; -1: streamed
  // Streamed shards: each one's object (key empty for a local shard), where
  // its samples start, and the hold function.
  std::vector<ObjectInfo> objects_;
  std::vector<int64_t> first_sample_;      // per shard, and one past the last
  std::vector<std::string> shard_damage_;  // per shard: its index's damage
  StreamedShards::Hold hold_;
  std::function<void(const std::string& key)> prefetch_;
  mutable absl::Mutex checked_mu_;
  // Per streamed shard: not yet checked (nullopt), or what the check found.
  mutable std::vector<std::optional<absl::Status>> checked_ ABSL_GUARDED_BY(checked_mu_);
  std::vector<FileStamp> shard_stamps_;  // each shard as opened (its samples' offsets)
  std::vector<Sample> samples_;
  std::vector<std::string> class_names_;
  std::vector<std::string> damage_;
  std::vector<std::string> extension_names_;  // Member::extension indexes it
  int64_t unlabeled_ = 0;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SOURCES_TAR_SHARDS_H_
