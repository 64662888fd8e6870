// A set of accepted secrets read from a file (bearer tokens, or
// "user:password" pairs for basic auth), one per line; blank lines and lines
// starting with '#' are ignored. Only SHA-256 digests are kept, and a presented
// secret is compared against every one of them in constant time, so that
// neither timing nor the number of matching bytes tells anything. The file is
// re-read when it changes on disk (checked at most once per `recheck`), so that
// tokens rotate without a restart: add the new one, move clients, remove the
// old. Thread-safe.
#ifndef STOKER_COMMON_SECRET_SET_H_
#define STOKER_COMMON_SECRET_SET_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stoker {

// Shortest secret accepted: a short token can be guessed.
inline constexpr size_t kMinSecretChars = 16;

// True if `secret` holds a space or control character, which no secret (and
// no token a client sends in a header) may.
bool HasSpaceOrControl(absl::string_view secret);

class SecretSet {
 public:
  // Reads `path`. INVALID_ARGUMENT naming the file and line when it cannot be
  // read, holds no secret, or a secret is shorter than kMinSecretChars or holds
  // a space or control character.
  static absl::StatusOr<std::unique_ptr<SecretSet>> Load(const std::string& path,
                                                         absl::Duration recheck = absl::Seconds(1));

  // True when `presented` is one of the secrets. Re-reads the file first if it
  // changed; a changed file that is no longer valid is logged and the secrets
  // read before stay in force (a bad edit must not lock every client out).
  bool Contains(absl::string_view presented);

  size_t size() const;

 private:
  using Digest = std::array<unsigned char, 32>;
  struct FileStamp {
    int64_t mtime_ns = 0, size = 0, inode = 0;
    bool operator==(const FileStamp& o) const { return mtime_ns == o.mtime_ns && size == o.size && inode == o.inode; }
  };
  SecretSet(std::string path, absl::Duration recheck) : path_(std::move(path)), recheck_(recheck) {}
  static absl::StatusOr<std::vector<Digest>> Read(const std::string& path, FileStamp* stamp);
  static Digest Hash(absl::string_view text);
  void MaybeReload() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const absl::Duration recheck_;
  mutable absl::Mutex mu_;
  std::vector<Digest> digests_ ABSL_GUARDED_BY(mu_);
  FileStamp stamp_ ABSL_GUARDED_BY(mu_);
  absl::Time checked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_COMMON_SECRET_SET_H_
