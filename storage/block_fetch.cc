#include "storage/block_fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

// One object being written.
struct Target {
  const ObjectInfo* object = nullptr;
  fs::path path, part;
  int fd = -1;
  int64_t blocks_left = 0;
};

struct Unit {
  size_t target = 0;
  int64_t offset = 0, length = 0;
};

class Fetch {
 public:
  Fetch(Storage& store, const std::vector<const ObjectInfo*>& objects, const fs::path& root,
        const BlockFetchOptions& options, const std::atomic<bool>* cancelled)
      : store_(store), options_(options), cancelled_(cancelled) {
    const int64_t block = std::max<int64_t>(1, options.block_bytes);
    targets_.resize(objects.size());
    for (size_t i = 0; i < objects.size(); ++i) {
      Target& t = targets_[i];
      t.object = objects[i];
      t.path = root / objects[i]->key;
      t.part = absl::StrCat(t.path.string(), ".", ::getpid(), kPartSuffix);  // this process's own
      int64_t at = 0;
      do {
        units_.push_back({i, at, std::min(block, objects[i]->size - at)});
        ++t.blocks_left;
        at += block;
      } while (at < objects[i]->size);
    }
  }

  absl::Status Run() {
    std::vector<std::thread> threads;
    const size_t n = std::min<size_t>(std::max(1, options_.parallel), units_.size());
    for (size_t i = 0; i < n; ++i) threads.emplace_back([this] { Work(); });
    for (std::thread& t : threads) t.join();
    absl::MutexLock lock(&mu_);
    for (Target& t : targets_) {  // what a failure left open
      if (t.fd >= 0) {
        ::close(t.fd);
        t.fd = -1;
        std::error_code ec;
        fs::remove(t.part, ec);
      }
    }
    return error_;
  }

 private:
  // The next unit, its target's file opened when it is the first; false when
  // none is left or the fetch failed.
  bool Take(Unit* unit, int* fd) {
    absl::MutexLock lock(&mu_);
    if (!error_.ok() || next_ >= units_.size()) return false;
    if (cancelled_ != nullptr && cancelled_->load()) {
      error_ = absl::CancelledError(absl::StrCat("fetching from ", store_.root(), ": stopped"));
      return false;
    }
    *unit = units_[next_++];
    Target& t = targets_[unit->target];
    if (unit->offset == 0) {
      std::error_code ec;
      fs::create_directories(t.path.parent_path(), ec);
      t.fd = ::open(t.part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (t.fd < 0) {
        error_ = absl::UnavailableError(absl::StrCat("cache: creating ", t.part.string(), ": ", std::strerror(errno)));
        return false;
      }
    }
    *fd = t.fd;
    return true;
  }

  void Fail(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = status;
  }

  // The block landed: the last one closes the file and renames it.
  void Done(size_t index) {
    int fd;
    {
      absl::MutexLock lock(&mu_);
      Target& t = targets_[index];
      if (--t.blocks_left > 0 || t.fd < 0) return;
      fd = t.fd;
      t.fd = -1;
    }
    const Target& t = targets_[index];
    if (t.object->mtime_ns > 0) {
      const struct timespec times[2] = {
          {0, UTIME_OMIT}, {static_cast<time_t>(t.object->mtime_ns / 1000000000), t.object->mtime_ns % 1000000000}};
      ::futimens(fd, times);
    }
    ::close(fd);
    std::error_code ec;
    fs::rename(t.part, t.path, ec);
    if (ec) {
      fs::remove(t.part, ec);
      Fail(absl::UnavailableError(absl::StrCat("cache: renaming ", t.part.string(), ": ", ec.message())));
    }
  }

  void Work() {
    Unit unit;
    int fd;
    std::string block;
    while (Take(&unit, &fd)) {
      block.clear();
      absl::Status status =
          unit.length > 0 ? ReadWholeRange(store_, *targets_[unit.target].object, unit.offset, unit.length, &block)
                          : absl::OkStatus();
      for (size_t done = 0; status.ok() && done < block.size();) {
        const ssize_t n =
            ::pwrite(fd, block.data() + done, block.size() - done, unit.offset + static_cast<int64_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          status = absl::UnavailableError(
              absl::StrCat("cache: writing ", targets_[unit.target].part.string(), ": ", std::strerror(errno)));
        } else {
          done += static_cast<size_t>(n);
        }
      }
      if (!status.ok()) return Fail(status);
      if (options_.bytes_done != nullptr) options_.bytes_done->fetch_add(unit.length);
      Done(unit.target);
    }
  }

  Storage& store_;
  const BlockFetchOptions options_;
  const std::atomic<bool>* const cancelled_;
  std::vector<Unit> units_;  // object by object, block by block

  absl::Mutex mu_;
  std::vector<Target> targets_;  // their fd and blocks_left: ABSL_GUARDED_BY(mu_)
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status ReadWholeRange(Storage& store, const ObjectInfo& object, int64_t offset, int64_t length,
                            std::string* out) {
  absl::Status status = store.ReadRange(object, offset, length, out);
  if (status.ok() && static_cast<int64_t>(out->size()) != length) {
    status = absl::DataLossError(
        absl::StrCat(store.Describe(object.key), ": ", out->size(), " bytes read of ", length, " at ", offset));
  }
  return status;
}

absl::Status FetchObjects(Storage& store, const std::vector<const ObjectInfo*>& objects, const fs::path& local_root,
                          const BlockFetchOptions& options, const std::atomic<bool>* cancelled) {
  if (objects.empty()) return absl::OkStatus();
  return Fetch(store, objects, local_root, options, cancelled).Run();
}

absl::Status SyncFilesystem(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cache: opening ", dir.string(), ": ", std::strerror(errno)));
  const int rc = ::syncfs(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return absl::UnavailableError(absl::StrCat("cache: syncing ", dir.string(), ": ", std::strerror(err)));
  return absl::OkStatus();
}

}  // namespace stoker
