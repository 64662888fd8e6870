// The durable state of a materialising run (materializer.h), kept in
// OUT.partial beside the shards being made: the run's settings (job.json),
// one record per finished shard (progress/shard-NNNNNN.tar.json), the lock
// that keeps two runs out of one OUT.partial (OUT.partial.lock), and the
// placing of the finished directory at OUT. What it reads back it checks (a
// record whose shard is gone or has another size is not a record); files are
// written whole or not at all (common/atomic_file.h). One per run; not
// thread-safe except WriteRecord, which writes only its shard's file.
#ifndef STOKER_MATERIALIZE_WORK_DIR_H_
#define STOKER_MATERIALIZE_WORK_DIR_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dataplane/sources/manifest.h"

namespace stoker {

// How a sample's fields are stored: 0 (absent in job.json) for runs made
// before fields were stored, whose shards hold the pixels alone.
inline constexpr int64_t kStoredFieldsVersion = 1;

// The settings job.json records; a resumed run must have the same.
struct MaterializeJob {
  std::string source_fingerprint, prefix, format;
  int64_t samples = 0, shard_samples = 0;
  int64_t stored_fields = kStoredFieldsVersion;

  // The first setting that differs from `then` (the interrupted run's), for
  // the error that refuses to resume it, or "".
  std::string Differs(const MaterializeJob& then) const;
};

// A finished shard, as recorded in progress/.
struct ShardRecord {
  Manifest::Shard shard;
  int64_t begin = 0, end = 0;  // source indices [begin, end)
  std::vector<Manifest::Failed> failed;
  std::set<std::string> fields;  // the extensions of the fields stored
};

class WorkDir {
 public:
  // OUT ("dir/" is read as "dir"), and OUT.partial beside it.
  explicit WorkDir(const std::filesystem::path& out);
  ~WorkDir();
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;

  const std::filesystem::path& out() const { return out_; }
  const std::filesystem::path& path() const { return work_; }

  // Takes OUT.partial.lock for the run (FAILED_PRECONDITION while another
  // run holds it); Unlock removes it while still held, so that a waiting run
  // makes its own.
  absl::Status Lock();
  void Unlock();

  // The interrupted run's settings: nullopt when there are none;
  // FAILED_PRECONDITION when job.json cannot be read (finished shards are
  // never wiped on a settings file that cannot be read).
  absl::StatusOr<std::optional<MaterializeJob>> ReadJob() const;
  // A new run: empties OUT.partial (nothing in it can be trusted without
  // settings) and makes progress/.
  absl::Status Clear();
  absl::Status WriteJob(const MaterializeJob& job) const;
  // Removes the shards an interrupted run cut short (*.tmp).
  void DropUnfinishedShards() const;

  // The record of the shard named `name` (ShardName) holding [begin, end),
  // when it is there, reads, matches, and its shard file has the recorded size.
  std::optional<ShardRecord> LoadRecord(const std::string& name, int64_t begin, int64_t end) const;
  absl::Status WriteRecord(const ShardRecord& record) const;

  // The manifest of a run cut short after writing it (only the placing was
  // left), with every shard it lists at its size; nullopt otherwise.
  std::optional<Manifest> FinishedManifest() const;
  absl::Status WriteManifest(const Manifest& manifest) const;

  // Moves (or, where OUT exists, swaps in one step) the finished OUT.partial
  // to OUT, drops the progress records and settings, and deletes the old OUT.
  absl::Status Place();
  // Deletes OUT.partial (a run that made nothing).
  void Remove() const;

 private:
  std::filesystem::path out_, work_;
  int lock_fd_ = -1;
};

}  // namespace stoker

#endif  // STOKER_MATERIALIZE_WORK_DIR_H_
