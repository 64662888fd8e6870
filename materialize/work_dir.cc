#include "materialize/work_dir.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <exception>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "dataplane/sources/dataset.h"
#include "dataplane/sources/json_fields.h"
#include "nlohmann/json.hpp"

namespace stoker {
namespace fs = std::filesystem;

namespace {

using nlohmann::json;

constexpr char kJobFile[] = "job.json";      // the settings of the run being built
constexpr char kProgressDir[] = "progress";  // one record per finished shard

absl::StatusOr<json> ReadJson(const fs::path& path) {
  absl::StatusOr<std::string> text = ReadFileBytes(path, int64_t{1} << 30);
  if (!text.ok()) return text.status();
  try {
    return json::parse(*text);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(path.string(), ": ", e.what()));
  }
}

json JobJson(const MaterializeJob& j) {
  return {{"source_fingerprint", j.source_fingerprint},
          {"prefix", j.prefix},
          {"format", j.format},
          {"samples", j.samples},
          {"shard_samples", j.shard_samples},
          {"stored_fields", j.stored_fields}};
}

json RecordJson(const ShardRecord& r) {
  json failures = json::array();
  for (const auto& f : r.failed) failures.push_back({{"index", f.index}, {"path", f.path}, {"reason", f.reason}});
  return {{"name", r.shard.name},         {"samples", r.shard.samples}, {"bytes", r.shard.bytes},
          {"checksum", r.shard.checksum}, {"begin", r.begin},           {"end", r.end},
          {"failed", failures},           {"fields", r.fields}};
}

std::optional<ShardRecord> RecordFromJson(const json& j) {
  try {
    ShardRecord r;
    using json_fields::Int;
    using json_fields::String;
    r.shard = {String(j, "name"), Int(j, "samples"), Int(j, "bytes"), String(j, "checksum")};
    r.begin = Int(j, "begin");
    r.end = Int(j, "end");
    for (const json& f : json_fields::Array(j, "failed")) {
      r.failed.push_back({Int(f, "index"), String(f, "path"), String(f, "reason")});
    }
    for (std::string& f : json_fields::Strings(j, "fields")) r.fields.insert(std::move(f));
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool HasSize(const fs::path& path, int64_t bytes) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  return !ec && static_cast<int64_t>(size) == bytes;
}

}  // namespace

std::string MaterializeJob::Differs(const MaterializeJob& then) const {
  if (source_fingerprint != then.source_fingerprint) {
    return absl::StrCat("the source dataset's fingerprint (", then.source_fingerprint, " then, ", source_fingerprint,
                        " now)");
  }
  if (prefix != then.prefix) return absl::StrCat("--prefix ('", then.prefix, "' then, '", prefix, "' now)");
  if (format != then.format) return absl::StrCat("the format (", then.format, " then, ", format, " now)");
  if (samples != then.samples) return absl::StrCat("the sample count (", then.samples, " then, ", samples, " now)");
  if (stored_fields != then.stored_fields) {
    return absl::StrCat("the tool's version (its shards ", then.stored_fields == 0 ? "hold no fields" : "differ",
                        "; this one stores each sample's fields beside the pixels)");
  }
  return "";
}

WorkDir::WorkDir(const fs::path& out) : out_(fs::absolute(out).lexically_normal()) {
  if (out_.filename().empty()) out_ = out_.parent_path();  // "dir/" -> "dir"
  work_ = out_.string() + ".partial";
}

WorkDir::~WorkDir() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

absl::Status WorkDir::Lock() {
  const fs::path path = work_.string() + ".lock";
  if (lock_fd_ >= 0) close(lock_fd_);
  lock_fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path.string(), ": ", std::generic_category().message(errno)));
  }
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("another stoker-materialize is writing ", out_.string(), " (",
                                                      path.string(), " is locked); wait for it to end"));
  }
  return absl::OkStatus();
}

void WorkDir::Unlock() {
  std::error_code ec;
  fs::remove(work_.string() + ".lock", ec);  // while still held: a waiting run then makes its own
  close(lock_fd_);
  lock_fd_ = -1;
}

absl::StatusOr<std::optional<MaterializeJob>> WorkDir::ReadJob() const {
  std::error_code ec;
  const fs::path path = work_ / kJobFile;
  if (!fs::exists(path, ec)) return std::nullopt;
  absl::StatusOr<json> j = ReadJson(path);
  try {
    if (!j.ok()) throw std::runtime_error(std::string(j.status().message()));
    using json_fields::Int;
    using json_fields::String;
    MaterializeJob job{String(*j, "source_fingerprint"),
                       String(*j, "prefix"),
                       String(*j, "format"),
                       Int(*j, "samples"),
                       Int(*j, "shard_samples"),
                       j->value("stored_fields", int64_t{0})};
    if (job.shard_samples < 1) throw std::invalid_argument("\"shard_samples\" is not positive");
    return job;
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read the interrupted run's settings in ", path.string(),
                                                      " (", e.what(), "); delete ", work_.string(), " to start again"));
  }
}

absl::Status WorkDir::Clear() {
  std::error_code ec;
  fs::remove_all(work_, ec);
  fs::create_directories(work_ / kProgressDir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", work_.string(), ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status WorkDir::WriteJob(const MaterializeJob& job) const {
  return WriteFileAtomically(work_ / kJobFile, JobJson(job).dump(1) + "\n", Durability::kDurable);
}

void WorkDir::DropUnfinishedShards() const {
  std::error_code ec;
  fs::create_directories(work_ / kProgressDir, ec);
  for (fs::directory_iterator it(work_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".tmp") fs::remove(it->path(), ec);  // a shard cut short
  }
}

std::optional<ShardRecord> WorkDir::LoadRecord(const std::string& name, int64_t begin, int64_t end) const {
  const fs::path path = work_ / kProgressDir / (name + ".json");
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  absl::StatusOr<json> j = ReadJson(path);
  if (!j.ok()) return std::nullopt;
  std::optional<ShardRecord> r = RecordFromJson(*j);
  if (!r || r->shard.name != name || r->begin != begin || r->end != end) return std::nullopt;
  if (!HasSize(work_ / r->shard.name, r->shard.bytes)) return std::nullopt;  // recorded, then lost
  return r;
}

absl::Status WorkDir::WriteRecord(const ShardRecord& record) const {
  // A path that is not UTF-8 is written with replacement characters, never a throw.
  const std::string text = RecordJson(record).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  return WriteFileAtomically(work_ / kProgressDir / (record.shard.name + ".json"), text, Durability::kDurable);
}

std::optional<Manifest> WorkDir::FinishedManifest() const {
  std::error_code ec;
  if (!fs::exists(work_ / kManifestFileName, ec)) return std::nullopt;
  if (!fs::exists(work_ / kJobFile, ec)) return std::nullopt;  // not this tool's run in progress
  absl::StatusOr<Manifest> m = ReadManifest(work_);
  if (!m.ok()) return std::nullopt;
  for (const Manifest::Shard& shard : m->shards) {
    if (!HasSize(work_ / shard.name, shard.bytes)) return std::nullopt;
  }
  return *std::move(m);
}

absl::Status WorkDir::WriteManifest(const Manifest& manifest) const {
  return WriteFileAtomically(work_ / kManifestFileName, manifest.ToJson(), Durability::kDurable);
}

absl::Status WorkDir::Place() {
  std::error_code ec;
  fs::remove_all(work_ / kProgressDir, ec);  // the manifest has it all; job.json stays until placed
  if (!fs::exists(out_, ec)) {
    fs::rename(work_, out_, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot rename ", work_.string(), " to ", out_.string(), ": ", ec.message()));
    }
  } else {
    // Swap the finished output for the old one in one step; the old one is
    // moved out of OUT.partial's name at once (a rerun must never take it for
    // a finished run), then deleted.
    if (renameat2(AT_FDCWD, work_.c_str(), AT_FDCWD, out_.c_str(), RENAME_EXCHANGE) != 0) {
      return absl::InternalError(absl::StrCat("cannot swap ", work_.string(), " for ", out_.string(), ": ",
                                              std::generic_category().message(errno)));
    }
    const fs::path trash = absl::StrCat(out_.string(), ".old.", getpid());
    fs::rename(work_, trash, ec);
    fs::remove_all(ec ? work_ : trash, ec);
  }
  fs::remove(out_ / kJobFile, ec);
  return FsyncPath(out_.parent_path());
}

void WorkDir::Remove() const {
  std::error_code ec;
  fs::remove_all(work_, ec);
}

}  // namespace stoker
