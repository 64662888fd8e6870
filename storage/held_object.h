// HeldObject: a streamed object's local copy (StoreMirror::Hold), kept in
// the cache while the handle lives; StreamedShards: a directory's shards
// that stay in the store and how to hold one. Header-only, so that readers of held
// copies (dataplane's tar source) need no link to the stores.
#ifndef STOKER_STORAGE_HELD_OBJECT_H_
#define STOKER_STORAGE_HELD_OBJECT_H_

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/storage.h"

namespace stoker {

// A streamed object's local copy, kept in the cache while this is alive.
class HeldObject {
 public:
  HeldObject(int fd, std::filesystem::path path, ObjectInfo info, std::function<void()> release)
      : fd_(fd), path_(std::move(path)), info_(std::move(info)), release_(std::move(release)) {}
  ~HeldObject() { release_(); }
  HeldObject(const HeldObject&) = delete;
  HeldObject& operator=(const HeldObject&) = delete;
  int fd() const { return fd_; }  // open for reading (pread); owned by the mirror
  const std::filesystem::path& path() const { return path_; }
  const ObjectInfo& info() const { return info_; }  // the version read

 private:
  const int fd_;
  const std::filesystem::path path_;
  const ObjectInfo info_;
  const std::function<void()> release_;
};

// A directory's shards kept in a remote store (StoreMirror::Streamed) and
// how to hold one's local copy (StoreMirror::Hold).
struct StreamedShards {
  std::vector<ObjectInfo> shards;  // keys "<name>/<file>.tar", sorted
  using Hold = std::function<absl::StatusOr<std::shared_ptr<const HeldObject>>(const std::string& key,
                                                                               const std::atomic<bool>* cancelled)>;
  Hold hold;
  // Starts fetching a shard reads will need soon (StoreMirror::Prefetch);
  // may be empty.
  std::function<void(const std::string& key)> prefetch;
};

}  // namespace stoker

#endif  // STOKER_STORAGE_HELD_OBJECT_H_
