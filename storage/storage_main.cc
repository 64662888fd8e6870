// stoker-storage: an operator's look at a store, with the settings a data
// server uses (endpoint, region, credentials, CA file, retries):
//   stoker-storage stat URL            size, ETag, modification time
//   stoker-storage ls URL              every object below URL (key, size, ETag)
//   stoker-storage cat URL             the object's bytes to stdout (--offset, --length)
//   stoker-storage sync ROOT NAME      copies dataset NAME under the data root ROOT into
//                                      --cache-dir as a server would (warms a node's cache)
// URL: s3://bucket/key, http(s)://host[:port]/path, or a local path.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/flag_names.h"
#include "storage/storage.h"
#include "storage/storage_flags.h"
#include "storage/store_mirror.h"
#include "storage/url.h"

ABSL_FLAG(int64_t, offset, 0, "cat: first byte");
ABSL_FLAG(int64_t, length, -1, "cat: bytes (-1: to the end)");
ABSL_FLAG(int64_t, block_bytes, 8 << 20, "cat: bytes per ranged read");
ABSL_FLAG(bool, counters, false, "Print requests, bytes and retries by reason to stderr at the end");

namespace stoker {
namespace {

int Fail(const absl::Status& s) {
  std::cerr << "stoker-storage: " << s << "\n";
  return 1;
}

// The store's root and the key of URL within it.
void Split(const std::string& text, std::string* root, std::string* key) {
  if (text.find("://") == std::string::npos) {
    *root = "/";
    *key = text.front() == '/' ? text.substr(1) : text;
    return;
  }
  absl::StatusOr<Url> url = ParseUrl(text);
  if (!url.ok() || url->scheme == "file") {
    *root = "/";
    *key = url.ok() ? url->path.substr(url->path.empty() ? 0 : 1) : text;
    return;
  }
  *root = url->scheme == "s3" ? absl::StrCat("s3://", url->host) : url->Origin();
  *key = UriDecode(url->path.empty() ? "" : url->path.substr(1));
}

int Command(Storage& s, const std::string& command, const std::string& key) {
  int rc = 0;
  if (command == "stat") {
    absl::StatusOr<ObjectInfo> info = s.Stat(key);
    if (!info.ok()) return Fail(info.status());
    std::cout << s.Describe(key) << "\t" << info->size << "\t" << info->etag << "\t" << info->mtime_ns << "\n";
  } else if (command == "ls") {
    absl::StatusOr<std::vector<ObjectInfo>> list = s.List(key);
    if (!list.ok()) return Fail(list.status());
    for (const ObjectInfo& info : *list) std::cout << info.key << "\t" << info.size << "\t" << info.etag << "\n";
  } else if (command == "cat") {
    absl::StatusOr<ObjectInfo> info = s.Stat(key);
    if (!info.ok()) return Fail(info.status());
    const int64_t offset = absl::GetFlag(FLAGS_offset);
    int64_t length = absl::GetFlag(FLAGS_length);
    if (length < 0) length = info->size - offset;
    const int64_t block = std::max<int64_t>(1, absl::GetFlag(FLAGS_block_bytes));
    for (int64_t at = offset; at < offset + length; at += block) {
      std::string bytes;
      const absl::Status st = s.ReadRange(*info, at, std::min(block, offset + length - at), &bytes);
      if (!st.ok()) {
        rc = Fail(st);
        break;
      }
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    }
    std::fflush(stdout);
  } else {
    return Fail(absl::InvalidArgumentError(absl::StrCat("command '", command, "'; expected stat, ls or cat")));
  }
  return rc;
}

// Copies `name` under `root` into the cache as a server's first open would.
int Sync(const std::string& root, const std::string& name) {
  absl::StatusOr<std::unique_ptr<StoreMirror>> mirror = MirrorFromFlags(root);
  if (!mirror.ok()) return Fail(mirror.status());
  const absl::Time start = absl::Now();
  const absl::Status s = (*mirror)->Ensure(name, /*directory=*/true);
  const MirrorStats m = (*mirror)->stats();
  const StorageCounters c = (*mirror)->store().counters();
  std::cout << (*mirror)->store().Describe(name) << ": " << m.objects_fetched << " objects fetched (" << m.bytes_fetched
            << " bytes), " << m.objects_reused << " already cached, " << c.requests << " requests, "
            << absl::ToDoubleSeconds(absl::Now() - start) << " s; in " << (*mirror)->local_root().string() << "\n";
  return s.ok() ? 0 : Fail(s);
}

int Run(const std::string& command, const std::string& target) {
  absl::StatusOr<StorageOptions> o = StorageOptionsFromFlags();
  if (!o.ok()) return Fail(o.status());
  std::string root, key;
  Split(target, &root, &key);
  absl::StatusOr<std::unique_ptr<Storage>> storage = OpenStorage(root, *o);
  if (!storage.ok()) return Fail(storage.status());
  Storage& s = **storage;
  const int rc = Command(s, command, key);
  if (absl::GetFlag(FLAGS_counters)) {
    const StorageCounters c = s.counters();
    std::cerr << "requests " << c.requests << " bytes " << c.bytes << " retries " << c.retries;
    for (const auto& [reason, n] : c.retries_by_reason) std::cerr << " " << reason << "=" << n;
    std::cerr << "\n";
  }
  return rc;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  std::vector<char*> args = stoker::ParseFlags(
      argc, argv,
      "stoker-storage stat|ls|cat URL: a store as a data server sees it (URL: s3://bucket/key, "
      "http(s)://host/path, or a path); stoker-storage sync ROOT NAME: copies dataset NAME under data root ROOT into "
      "--cache-dir as a server would");
  if (args.size() == 4 && std::string(args[1]) == "sync") return stoker::Sync(args[2], args[3]);
  if (args.size() != 3) {
    std::cerr << "usage: stoker-storage [flags] stat|ls|cat URL, or sync ROOT NAME (--help for the flags)\n";
    return 2;
  }
  return stoker::Run(args[1], args[2]);
}
