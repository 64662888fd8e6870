#include "storage/store_mirror.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/atomic_file.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "storage/block_fetch.h"
#include "storage/sigv4.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifestDir = ".stoker-mirror";

// A key the store listed, checked before it names a local file: no empty,
// "." or ".." segment, no leading '/', nothing of the mirror's own.
absl::Status CheckKey(const std::string& key) {
  if (key.empty() || key.front() == '/' || absl::StrContains(key, kManifestDir) || absl::EndsWith(key, kPartSuffix)) {
    return absl::InvalidArgumentError(absl::StrCat("object key '", key, "' cannot be kept in the cache"));
  }
  for (absl::string_view part : absl::StrSplit(key, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("object key '", key, "' would leave the cache directory"));
    }
  }
  return absl::OkStatus();
}

struct Manifest {
  std::string name;
  int64_t used_unix = 0;
  std::string listing_version;  // Storage::ListingVersion when the objects were listed; "" none
  struct Object {
    int64_t size = 0;
    std::string etag;
    int64_t mtime_ns = 0;
  };
  std::map<std::string, Object> objects;  // by key
  int64_t bytes() const {
    int64_t b = 0;
    for (const auto& [k, v] : objects) b += v.size;
    return b;
  }
};

std::optional<Manifest> LoadManifest(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j.contains("objects") || !j["objects"].is_object()) return std::nullopt;
  Manifest m;
  m.name = j["name"].get<std::string>();
  m.used_unix = j.value("used_unix", int64_t{0});
  m.listing_version = j.value("listing_version", std::string());
  for (const auto& [key, v] : j["objects"].items()) {  // [size, ETag] or [size, ETag, mtime_ns]
    if (!v.is_array() || v.size() < 2 || v.size() > 3 || !v[0].is_number_integer() || !v[1].is_string() ||
        (v.size() == 3 && !v[2].is_number_integer())) {
      return std::nullopt;
    }
    m.objects[key] = {v[0].get<int64_t>(), v[1].get<std::string>(), v.size() == 3 ? v[2].get<int64_t>() : 0};
  }
  return m;
}

absl::Status WriteManifest(const fs::path& path, const Manifest& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["used_unix"] = m.used_unix;
  j["listing_version"] = m.listing_version;
  j["objects"] = nlohmann::json::object();
  for (const auto& [key, v] : m.objects) j["objects"][key] = {v.size, v.etag, v.mtime_ns};
  return WriteFileAtomically(path, j.dump(), Durability::kDurable);
}

// Removes `path` and syncs its directory, so that the removal outlives a power loss.
absl::Status RemoveDurably(const fs::path& path) {
  std::error_code ec;
  if (!fs::remove(path, ec)) return absl::OkStatus();
  const int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return absl::UnavailableError(absl::StrCat("cache: opening ", path.parent_path().string()));
  const int rc = ::fsync(dir);
  ::close(dir);
  if (rc != 0) return absl::UnavailableError(absl::StrCat("cache: syncing ", path.parent_path().string()));
  return absl::OkStatus();
}

bool LocalMatches(const fs::path& path, int64_t size) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == size;
}

}  // namespace

StoreMirror::StoreMirror(std::unique_ptr<Storage> store, MirrorOptions options, fs::path local_root)
    : store_(std::move(store)), options_(std::move(options)), local_root_(std::move(local_root)) {}

StoreMirror::~StoreMirror() { JoinPersisted(); }

void StoreMirror::JoinPersisted() {
  std::vector<std::thread> persisting;
  {
    absl::MutexLock lock(&mu_);
    persisting.swap(persisting_);
  }
  for (std::thread& t : persisting) t.join();
}

absl::StatusOr<std::unique_ptr<StoreMirror>> StoreMirror::Create(std::unique_ptr<Storage> store,
                                                                 MirrorOptions options) {
  if (options.cache_dir.empty()) return absl::InvalidArgumentError("the store's cache needs a directory (--cache-dir)");
  const fs::path local = options.cache_dir / Sha256Hex(store->root()).substr(0, 16);
  std::error_code ec;
  fs::create_directories(local / kManifestDir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cache directory ", options.cache_dir.string(), " cannot be made: ", ec.message()));
  }
  std::unique_ptr<StoreMirror> m(new StoreMirror(std::move(store), std::move(options), local));
  absl::MutexLock lock(&m->mu_);
  for (const auto& entry : fs::directory_iterator(local / kManifestDir, ec)) {
    if (entry.path().extension() != ".json") continue;
    if (std::optional<Manifest> manifest = LoadManifest(entry.path())) {
      m->held_[manifest->name] = {manifest->bytes(), manifest->used_unix};
      m->stats_.bytes_cached += manifest->bytes();
    }
  }
  LOG(INFO) << "store " << m->store_->root() << ": cached in " << local.string() << " ("
            << m->stats_.bytes_cached / 1000000 << " MB held of " << m->options_.cache_bytes / 1000000 << " MB)";
  return m;
}

fs::path StoreMirror::ManifestPath(const std::string& name) const {
  return local_root_ / kManifestDir / (Sha256Hex(name).substr(0, 24) + ".json");
}

MirrorStats StoreMirror::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool StoreMirror::Used(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  return used_.count(name) > 0;
}

void StoreMirror::SetPhase(const std::string& name, const std::string& what, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (name != phase_.name || what != phase_.what) phase_.since = absl::Now();  // each phase timed on its own
  phase_.name = name;
  phase_.what = what;
  phase_.bytes = bytes;
  fetched_now_.store(0);
}

std::string StoreMirror::Progress(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  if (phase_.name.empty()) return "";
  if (phase_.name != name) {  // Ensure copies one name at a time
    return absl::StrCat("waiting for the copy of ", store_->Describe(phase_.name), " to end");
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - phase_.since);
  if (phase_.what != "copying") {
    return absl::StrFormat("%s: %s (%.1f s)", store_->Describe(phase_.name), phase_.what, seconds);
  }
  const int64_t done = fetched_now_.load();
  return absl::StrFormat("%s: %.1f of %.1f MB copied (%.1f MB/s, %.1f s)", store_->Describe(phase_.name), done / 1e6,
                         phase_.bytes / 1e6, done / 1e6 / std::max(1e-3, seconds), seconds);
}

absl::Status StoreMirror::Ensure(const std::string& name, bool directory, const std::atomic<bool>* cancelled) {
  // This process reads the version it first fetched (checked before waiting
  // for another name's copy).
  if (Used(name)) return absl::OkStatus();
  absl::MutexLock ensure(&ensure_mu_);
  if (Used(name)) return absl::OkStatus();
  SetPhase(name, "waiting for another process's copy into the shared cache");
  const absl::Time waited_from = absl::Now();
  absl::Cleanup done = [this, waited_from] {
    SetPhase("", "");  // Progress() says nothing once Ensure returns
    absl::MutexLock lock(&mu_);
    stats_.ensure_seconds += absl::ToDoubleSeconds(absl::Now() - waited_from);
  };
  // Other processes sharing the cache (local-mode ranks, stoker-storage sync)
  // wait for this one's copy, and it for theirs: an advisory lock on the
  // cache, held until the copy's manifest is written.
  const fs::path lock_path = local_root_ / kManifestDir / "lock";
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return absl::UnavailableError(absl::StrCat("cache: opening ", lock_path.string(), ": ", std::strerror(errno)));
  }
  while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  SetPhase(name, "listing");
  int held_fd = lock_fd;  // handed to the copy's persisting thread when there is one
  bool stale = false;
  absl::Status s = EnsureLocked(name, directory, cancelled, &stale, &held_fd);
  if (stale) {  // a cached listing named a version the store no longer has: list again
    SetPhase(name, "listing");
    s = EnsureLocked(name, directory, cancelled, nullptr, &held_fd);
  }
  if (held_fd >= 0) ::close(held_fd);
  return s;
}

absl::Status StoreMirror::EnsureLocked(const std::string& name, bool directory, const std::atomic<bool>* cancelled,
                                       bool* stale, int* lock_fd) {
  if (absl::Status s = CheckKey(name); !s.ok()) return s;
  JoinPersisted();  // earlier copies' threads have released the lock: finished
  const absl::Time start = absl::Now();
  const Manifest previous = LoadManifest(ManifestPath(name)).value_or(Manifest{});
  std::vector<ObjectInfo> objects;
  std::string version;
  if (directory && stale != nullptr &&
      !previous.listing_version.empty()) {  // one request may tell that the cached listing stands
    absl::StatusOr<std::string> v = store_->ListingVersion(name);
    if (!v.ok()) return v.status();
    version = *std::move(v);
  }
  const bool cached_listing =
      directory && !version.empty() && version == previous.listing_version && !previous.objects.empty();
  if (cached_listing) {
    // The listing this cache made stands (one request): its objects, as listed then.
    for (const auto& [key, v] : previous.objects) objects.push_back({key, v.size, v.etag, v.mtime_ns});
  } else if (directory) {
    // Listed by the bare name, then kept below "name/": no '/' in the query
    // (moto, an S3 emulator, mis-signs an encoded one) at the cost of the
    // rare sibling "name2/..." in the listing.
    absl::StatusOr<std::vector<ObjectInfo>> listed = store_->ListVersioned(name, &version);
    if (!listed.ok()) return listed.status();
    for (ObjectInfo& o : *listed) {
      if (absl::StartsWith(o.key, name + "/")) objects.push_back(std::move(o));
    }
    // A key listed twice (an index.txt's repeated line) is fetched once.
    std::sort(objects.begin(), objects.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    objects.erase(std::unique(objects.begin(), objects.end(),
                              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key == b.key; }),
                  objects.end());
    if (objects.empty()) return absl::NotFoundError(absl::StrCat("no objects under ", store_->Describe(name + "/")));
  } else {
    absl::StatusOr<ObjectInfo> one = store_->Stat(name);
    if (!one.ok()) return one.status();
    objects.push_back(*std::move(one));
  }
  Manifest next;
  next.name = name;
  next.listing_version = version;
  next.used_unix = absl::ToUnixSeconds(absl::Now());
  for (const ObjectInfo& o : objects) {
    if (absl::Status s = CheckKey(o.key); !s.ok())
      return absl::Status(s.code(), absl::StrCat(store_->root(), ": ", s.message()));
    next.objects[o.key] = {o.size, o.etag, o.mtime_ns};
  }
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = MakeRoom(name, next.bytes()); !s.ok()) return s;
  }
  std::vector<const ObjectInfo*> wanted;
  int64_t wanted_bytes = 0, reused = 0, reused_bytes = 0;
  for (const ObjectInfo& o : objects) {
    auto old = previous.objects.find(o.key);
    const bool same = old != previous.objects.end() && old->second.size == o.size && old->second.etag == o.etag &&
                      LocalMatches(local_root_ / o.key, o.size);
    if (same) {
      ++reused;
      reused_bytes += o.size;
    } else {
      wanted.push_back(&o);
      wanted_bytes += o.size;
    }
  }
  // Many ranged reads in flight, over all the objects (a large one is read
  // by many at once).
  BlockFetchOptions fetch;
  fetch.block_bytes = options_.block_bytes;
  fetch.parallel = options_.parallel;
  fetch.bytes_done = &fetched_now_;
  SetPhase(name, "copying", wanted_bytes);
  // The old manifest no longer vouches for files about to be replaced
  // (after a power loss an unsynced new copy could match its sizes).
  if (std::any_of(wanted.begin(), wanted.end(), [&](const ObjectInfo* o) { return previous.objects.count(o->key); })) {
    if (absl::Status s = RemoveDurably(ManifestPath(name)); !s.ok()) return s;
  }
  if (absl::Status s = FetchObjects(*store_, wanted, local_root_, fetch, cancelled); !s.ok()) {
    if (cached_listing && absl::IsFailedPrecondition(s)) *stale = true;  // Ensure lists again
    return s;
  }
  bool removed = false;
  for (const auto& [key, v] : previous.objects) {  // gone from the store: gone here
    if (!next.objects.count(key)) {
      std::error_code ec;
      removed = fs::remove(local_root_ / key, ec) || removed;
    }
  }
  absl::MutexLock lock(&mu_);
  // Durable in the background: the files are synced, then the manifest that
  // vouches for them written (until then a restart fetches again); sessions
  // read the files now.
  // Nothing fetched or removed (a warm restart): no change to flush, only the
  // manifest (a removal must be durable before a manifest without the file).
  persisting_.emplace_back([this, next, path = ManifestPath(name), fd = *lock_fd, wrote = !wanted.empty() || removed] {
    absl::Status s = wrote ? SyncFilesystem(local_root_) : absl::OkStatus();
    if (s.ok()) s = WriteManifest(path, next);
    if (!s.ok())
      LOG(WARNING) << store_->Describe(next.name) << ": the cache's copy is not recorded (" << s
                   << "); a restart fetches it again";
    ::close(fd);  // other processes may use the cache now
  });
  *lock_fd = -1;
  stats_.bytes_cached += next.bytes() - held_[name].bytes;
  held_[name] = {next.bytes(), next.used_unix};
  used_.insert(name);
  stats_.objects_fetched += static_cast<int64_t>(wanted.size());
  stats_.bytes_fetched += wanted_bytes;
  stats_.objects_reused += reused;
  stats_.bytes_reused += reused_bytes;
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  LOG(INFO) << store_->Describe(name) << ": " << objects.size() << " objects, " << wanted.size() << " fetched ("
            << wanted_bytes / 1000000 << " MB in " << seconds << " s), " << reused << " already cached";
  return absl::OkStatus();
}

int64_t StoreMirror::HeldExcept(const std::string& name) const {
  int64_t total = 0;
  for (const auto& [n, h] : held_) total += n == name ? 0 : h.bytes;
  return total;
}

bool StoreMirror::InUse(const std::string& key) const {
  // A name this process uses may sit inside another (a tokenizer model in a
  // dataset's directory).
  for (const std::string& u : used_) {
    if (key == u || absl::StartsWith(key, u + "/")) return true;
  }
  return false;
}

absl::Status StoreMirror::MakeRoom(const std::string& name, int64_t bytes) {
  while (HeldExcept(name) + bytes > options_.cache_bytes) {
    // The least recently used name that this process has not opened.
    std::string victim;
    int64_t oldest = INT64_MAX;
    for (const auto& [n, h] : held_) {
      if (n == name || used_.count(n)) continue;
      if (h.used_unix < oldest) {
        oldest = h.used_unix;
        victim = n;
      }
    }
    if (victim.empty()) {
      return absl::ResourceExhaustedError(
          absl::StrCat(store_->Describe(name), " needs ", bytes, " bytes in the cache, which holds ", HeldExcept(name),
                       " bytes of datasets this server has open, of --cache-bytes=", options_.cache_bytes,
                       ": raise --cache-bytes or give the cache more room"));
    }
    const std::optional<Manifest> m = LoadManifest(ManifestPath(victim));
    std::error_code ec;
    if (m) {
      for (const auto& [key, v] : m->objects) {
        if (!InUse(key)) fs::remove(local_root_ / key, ec);
      }
    }
    fs::remove(ManifestPath(victim), ec);
    const int64_t bytes_out = held_[victim].bytes;
    LOG(INFO) << "cache: evicted " << store_->Describe(victim) << " (" << bytes_out << " bytes)";
    stats_.evicted_bytes += bytes_out;
    stats_.bytes_cached -= bytes_out;
    held_.erase(victim);
  }
  return absl::OkStatus();
}

}  // namespace stoker
