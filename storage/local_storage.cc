#include "storage/local_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "storage/url.h"

namespace stoker {
namespace {

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::UnavailableError(message);
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

class LocalStorage final : public Storage {
 public:
  explicit LocalStorage(std::string directory) : directory_(std::move(directory)) {}

  std::string root() const override { return directory_; }
  std::string Describe(absl::string_view key) const override { return JoinKey(directory_, key); }
  bool is_local() const override { return true; }

  absl::StatusOr<ObjectInfo> Stat(absl::string_view key) override {
    const std::string path = Describe(key);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", path);
    if (!S_ISREG(st.st_mode)) return absl::NotFoundError(absl::StrCat(path, " is not a file"));
    return ObjectInfo{std::string(key), static_cast<int64_t>(st.st_size), "", MtimeNs(st)};
  }

  absl::StatusOr<std::vector<ObjectInfo>> List(absl::string_view prefix) override {
    // The directory part of the prefix is walked; the rest filters names.
    const size_t slash = prefix.rfind('/');
    const std::string start = Describe(slash == absl::string_view::npos ? "" : prefix.substr(0, slash));
    std::vector<ObjectInfo> out;
    std::error_code ec;
    std::filesystem::recursive_directory_iterator it(start,
                                                     std::filesystem::directory_options::follow_directory_symlink, ec);
    if (ec) {
      if (ec == std::errc::no_such_file_or_directory) return out;
      return absl::UnavailableError(absl::StrCat("listing ", start, ": ", ec.message()));
    }
    for (; it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) return absl::UnavailableError(absl::StrCat("listing ", start, ": ", ec.message()));
      if (!it->is_regular_file(ec)) continue;
      std::string key = std::filesystem::relative(it->path(), directory_, ec).generic_string();
      if (ec || !absl::StartsWith(key, prefix)) continue;
      struct stat st;
      if (::stat(it->path().c_str(), &st) != 0) continue;  // gone since
      out.push_back({std::move(key), static_cast<int64_t>(st.st_size), "", MtimeNs(st)});
    }
    std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
  }

  absl::Status ReadRange(const ObjectInfo& object, int64_t offset, int64_t length, std::string* out) override {
    const std::string path = Describe(object.key);
    if (absl::Status s = CheckRange(*this, object, offset, length); !s.ok()) return s;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "opening", path);
    struct stat st;
    absl::Status status;
    if (::fstat(fd, &st) != 0) {
      status = ErrnoStatus(errno, "stat", path);
    } else if (st.st_size != object.size || MtimeNs(st) != object.mtime_ns) {
      status = absl::FailedPreconditionError(absl::StrCat(path, " changed since it was first read (", object.size,
                                                          " -> ", st.st_size, " bytes, or a new mtime)"));
    }
    const size_t base = out->size();
    if (status.ok()) out->resize(base + static_cast<size_t>(length));
    int64_t done = 0;
    while (status.ok() && done < length) {
      const ssize_t n = ::pread(fd, out->data() + base + done, static_cast<size_t>(length - done), offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) status = ErrnoStatus(errno, "reading", path);
      if (n == 0) status = absl::FailedPreconditionError(absl::StrCat(path, " was cut short while being read"));
      if (n > 0) done += n;
    }
    ::close(fd);
    if (!status.ok()) out->resize(base);
    return status;
  }

 private:
  const std::string directory_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Storage>> OpenLocalStorage(absl::string_view directory) {
  std::error_code ec;
  if (!std::filesystem::is_directory(std::string(directory), ec)) {
    return absl::InvalidArgumentError(absl::StrCat("'", directory, "' is not a directory"));
  }
  std::string dir(directory);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return std::unique_ptr<Storage>(new LocalStorage(std::move(dir)));
}

}  // namespace stoker
