#include "common/secret_set.h"

#include <sys/stat.h>

#include <fstream>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace stoker {
namespace {

absl::Status Stat(const std::string& path, int64_t* mtime_ns, int64_t* size, int64_t* inode) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read secrets file ", path, ": ", strerror(errno)));
  }
  *mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  *size = st.st_size;
  *inode = static_cast<int64_t>(st.st_ino);
  return absl::OkStatus();
}

}  // namespace

bool HasSpaceOrControl(absl::string_view secret) {
  for (char c : secret) {
    if (c <= ' ' || c == 0x7f) return true;
  }
  return false;
}

SecretSet::Digest SecretSet::Hash(absl::string_view text) {
  Digest d;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  return d;
}

absl::StatusOr<std::vector<SecretSet::Digest>> SecretSet::Read(const std::string& path, FileStamp* stamp) {
  if (absl::Status s = Stat(path, &stamp->mtime_ns, &stamp->size, &stamp->inode); !s.ok()) return s;
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot open secrets file ", path));
  std::vector<Digest> digests;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view secret = absl::StripAsciiWhitespace(line);
    if (secret.empty() || secret.front() == '#') continue;
    if (HasSpaceOrControl(secret)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", number, ": a secret may not hold spaces or control characters"));
    }
    if (secret.size() < kMinSecretChars) {
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", number, ": secret is ", secret.size(),
                                                     " characters; at least ", kMinSecretChars, " are needed"));
    }
    digests.push_back(Hash(secret));
  }
  if (digests.empty()) return absl::InvalidArgumentError(absl::StrCat("secrets file ", path, " holds no secret"));
  return digests;
}

absl::StatusOr<std::unique_ptr<SecretSet>> SecretSet::Load(const std::string& path, absl::Duration recheck) {
  std::unique_ptr<SecretSet> set(new SecretSet(path, recheck));
  absl::MutexLock lock(&set->mu_);
  absl::StatusOr<std::vector<Digest>> digests = Read(path, &set->stamp_);
  if (!digests.ok()) return digests.status();
  set->digests_ = *std::move(digests);
  set->checked_ = absl::Now();
  return set;
}

void SecretSet::MaybeReload() {
  const absl::Time now = absl::Now();
  if (now - checked_ < recheck_) return;
  checked_ = now;
  FileStamp stamp;
  if (!Stat(path_, &stamp.mtime_ns, &stamp.size, &stamp.inode).ok() || stamp == stamp_) return;
  absl::StatusOr<std::vector<Digest>> digests = Read(path_, &stamp);
  stamp_ = stamp;  // a bad version is reported once, not at every call
  if (!digests.ok()) {
    LOG(ERROR) << "keeping the " << digests_.size() << " secrets read before: " << digests.status();
    return;
  }
  LOG(INFO) << "re-read " << path_ << ": " << digests->size() << " secrets";
  digests_ = *std::move(digests);
}

bool SecretSet::Contains(absl::string_view presented) {
  const Digest d = Hash(presented);
  absl::MutexLock lock(&mu_);
  MaybeReload();
  int matches = 0;
  for (const Digest& accepted : digests_) {  // every one, no early exit
    matches |= CRYPTO_memcmp(accepted.data(), d.data(), d.size()) == 0;
  }
  return matches != 0;
}

size_t SecretSet::size() const {
  absl::MutexLock lock(&mu_);
  return digests_.size();
}

}  // namespace stoker
