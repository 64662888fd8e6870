#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace stoker {

namespace fs = std::filesystem;

absl::Status FsyncPath(const fs::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path.string(), " to sync it: ", strerror(errno)));
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("fsync of ", path.string(), " failed: ", strerror(errno)));
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const fs::path& path, absl::string_view content, Durability durability) {
  // "<path>.XXXXXX.tmp": a writer that died midway leaves a *.tmp file,
  // which the materialiser's restart removes.
  std::string tmp = path.string() + ".XXXXXX.tmp";
  const int fd = mkostemps(tmp.data(), 4, O_CLOEXEC);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make a temporary file beside ", path.string(), ": ", strerror(errno)));
  }
  // mkostemp makes it 0600; other processes sharing the directory (servers
  // running as another user) read it too. (umask is process-wide, so it is
  // not consulted from here.)
  fchmod(fd, 0644);
  absl::Status status;
  for (size_t done = 0; done < content.size() && status.ok();) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      status = absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", strerror(errno)));
    else
      done += static_cast<size_t>(n);
  }
  if (status.ok() && durability == Durability::kDurable && fsync(fd) != 0) {
    status = absl::InternalError(absl::StrCat("fsync of ", tmp, " failed: ", strerror(errno)));
  }
  if (close(fd) != 0 && status.ok()) status = absl::InternalError(absl::StrCat("cannot close ", tmp));
  std::error_code ec;
  if (status.ok()) {
    fs::rename(tmp, path, ec);
    if (ec)
      status = absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path.string(), ": ", ec.message()));
  }
  if (!status.ok()) {
    fs::remove(tmp, ec);
    return status;
  }
  return durability == Durability::kDurable ? FsyncPath(path.parent_path().empty() ? "." : path.parent_path())
                                            : absl::OkStatus();
}

}  // namespace stoker
