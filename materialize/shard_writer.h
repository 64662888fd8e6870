// Writes one WebDataset-style tar shard with libarchive (pax format, ustar
// headers where the names fit), so that tar, webdataset and Stoker's own
// reader all read it. Every member gets the same fixed owner, mode and time,
// so the same samples make the same bytes (a resumed run's shards equal an
// uninterrupted run's). Thread-compatible; one writer per file.
#ifndef STOKER_MATERIALIZE_SHARD_WRITER_H_
#define STOKER_MATERIALIZE_SHARD_WRITER_H_

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

struct archive;

namespace stoker {

class ShardWriter {
 public:
  ShardWriter() = default;
  ~ShardWriter();  // abandons an unfinished file (removes it)
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Creates (truncates) `path`.
  absl::Status Open(const std::filesystem::path& path);
  absl::Status Add(absl::string_view name, absl::string_view data);
  // Ends the archive and makes the file durable (fsync).
  absl::Status Finish();

 private:
  absl::Status Error(absl::string_view what);

  std::filesystem::path path_;
  archive* archive_ = nullptr;
  int fd_ = -1;
};

}  // namespace stoker

#endif  // STOKER_MATERIALIZE_SHARD_WRITER_H_
