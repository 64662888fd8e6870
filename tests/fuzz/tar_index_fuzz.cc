// The tar scanner and shard index (review 1.5): any bytes as a shard, then
// every sample read. Must never crash, hang, or read outside the file.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dataplane/sources/tar_shards.h"

namespace {

const std::filesystem::path& Dir() {
  static const auto* dir = [] {
    auto* d = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                        ("stoker_tar_fuzz_" + std::to_string(getpid())));
    std::filesystem::create_directories(*d);
    return d;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path shard = Dir() / "s.tar";
  std::filesystem::remove(shard.string() + ".stoker-index");
  {
    std::ofstream out(shard, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto source = stoker::TarShardSource::Open(Dir(), /*max_file_bytes=*/1 << 20);
  if (!source.ok()) return 0;
  const std::vector<std::string> extensions = (*source)->extensions();
  for (int64_t i = 0; i < (*source)->size(); ++i) {
    (void)(*source)->Read(i);
    (void)(*source)->label(i);
    for (const std::string& ext : extensions) (void)(*source)->ReadField(i, {ext}, nullptr);  // every member
  }
  // And again from the sidecar the first open wrote: the same members.
  auto again = stoker::TarShardSource::Open(Dir(), 1 << 20);
  if (again.ok() && (*again)->size() != (*source)->size()) __builtin_trap();
  if (again.ok() && (*again)->unlabeled_samples() != (*source)->unlabeled_samples()) __builtin_trap();
  for (int64_t i = 0; again.ok() && i < (*source)->size(); ++i) {
    for (const std::string& ext : extensions) {
      if ((*source)->ReadField(i, {ext}, nullptr).ok() != (*again)->ReadField(i, {ext}, nullptr).ok()) __builtin_trap();
    }
  }
  return 0;
}
