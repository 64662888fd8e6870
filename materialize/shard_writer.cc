#include "materialize/shard_writer.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace stoker {

ShardWriter::~ShardWriter() {
  if (archive_ != nullptr) archive_write_free(archive_);
  if (fd_ >= 0) {
    close(fd_);
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
}

absl::Status ShardWriter::Error(absl::string_view what) {
  const char* detail = archive_ != nullptr ? archive_error_string(archive_) : nullptr;
  return absl::InternalError(
      absl::StrCat("writing shard ", path_.string(), ": ", what, detail != nullptr ? ": " : "", detail ? detail : ""));
}

absl::Status ShardWriter::Open(const std::filesystem::path& path) {
  path_ = path;
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path.string(), ": ", std::generic_category().message(errno)));
  }
  archive_ = archive_write_new();
  if (archive_ == nullptr) return absl::ResourceExhaustedError("libarchive: out of memory");
  if (archive_write_set_format_pax_restricted(archive_) != ARCHIVE_OK) return Error("pax format");
  if (archive_write_open_fd(archive_, fd_) != ARCHIVE_OK) return Error("open");
  return absl::OkStatus();
}

absl::Status ShardWriter::Add(absl::string_view name, absl::string_view data) {
  std::unique_ptr<archive_entry, decltype(&archive_entry_free)> entry(archive_entry_new(), archive_entry_free);
  archive_entry_copy_pathname(entry.get(), std::string(name).c_str());
  archive_entry_set_filetype(entry.get(), AE_IFREG);
  archive_entry_set_perm(entry.get(), 0444);
  archive_entry_set_size(entry.get(), static_cast<la_int64_t>(data.size()));
  archive_entry_set_mtime(entry.get(), 0, 0);  // fixed: same samples, same bytes
  if (archive_write_header(archive_, entry.get()) != ARCHIVE_OK) return Error(absl::StrCat("header of ", name));
  if (archive_write_data(archive_, data.data(), data.size()) != static_cast<la_ssize_t>(data.size())) {
    return Error(absl::StrCat("data of ", name));
  }
  return absl::OkStatus();
}

absl::Status ShardWriter::Finish() {
  if (archive_write_close(archive_) != ARCHIVE_OK) return Error("close");
  archive_write_free(archive_);
  archive_ = nullptr;
  if (fsync(fd_) != 0) return Error("fsync");
  close(fd_);
  fd_ = -1;
  return absl::OkStatus();
}

}  // namespace stoker
