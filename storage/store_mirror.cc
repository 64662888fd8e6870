#include "storage/store_mirror.h"

#include <fcntl.h>
#include <signal.h>
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
#include "absl/strings/numbers.h"
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
constexpr const char* kStreamPrefix = "stream-";  // + pid: a process's streamed copies

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
  std::map<std::string, Object> objects;   // by key: copied whole
  std::map<std::string, Object> streamed;  // by key: shards kept in the store (StoreMirror::Hold)
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
  for (const char* field : {"objects", "streamed"}) {
    if (!j.contains(field)) continue;
    if (!j[field].is_object()) return std::nullopt;
    for (const auto& [key, v] : j[field].items()) {  // [size, ETag] or [size, ETag, mtime_ns]
      if (!v.is_array() || v.size() < 2 || v.size() > 3 || !v[0].is_number_integer() || !v[1].is_string() ||
          (v.size() == 3 && !v[2].is_number_integer())) {
        return std::nullopt;
      }
      (field == std::string("objects") ? m.objects : m.streamed)[key] = {v[0].get<int64_t>(), v[1].get<std::string>(),
                                                                         v.size() == 3 ? v[2].get<int64_t>() : 0};
    }
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
  if (!m.streamed.empty()) {
    j["streamed"] = nlohmann::json::object();
    for (const auto& [key, v] : m.streamed) j["streamed"][key] = {v.size, v.etag, v.mtime_ns};
  }
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

// A tar shard directly below the directory `name` (what a streamed directory
// leaves in the store).
bool IsShardOf(const std::string& name, const std::string& key) {
  if (!absl::StartsWith(key, name + "/") || !absl::EndsWith(key, ".tar")) return false;
  return key.find('/', name.size() + 1) == std::string::npos;
}

bool LocalMatches(const fs::path& path, int64_t size) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == size;
}

// What `name` holds in the store: one object, or a directory's objects
// below "name/" (each key once, sorted). With `may_use_cache` and a listing
// version recorded, one request tells whether the previous listing stands;
// then its objects are used as listed then (`cached`). Every key is checked
// (CheckKey) before it names a local file; the bytes are totalled, and the
// directory's shards' apart.
struct Listing {
  std::vector<ObjectInfo> objects;
  std::string version;
  bool cached = false;
  int64_t total_bytes = 0, shard_bytes = 0;
};

absl::StatusOr<Listing> ListObjects(Storage& store, const std::string& name, bool directory, bool may_use_cache,
                                    const Manifest& previous) {
  Listing listing;
  std::vector<ObjectInfo>& objects = listing.objects;
  std::string& version = listing.version;
  if (directory && may_use_cache &&
      !previous.listing_version.empty()) {  // one request may tell that the cached listing stands
    absl::StatusOr<std::string> v = store.ListingVersion(name);
    if (!v.ok()) return v.status();
    version = *std::move(v);
  }
  listing.cached = directory && !version.empty() && version == previous.listing_version && !previous.objects.empty();
  if (listing.cached) {
    // The listing this cache made stands (one request): its objects, as listed then.
    for (const auto& [key, v] : previous.objects) objects.push_back({key, v.size, v.etag, v.mtime_ns});
    for (const auto& [key, v] : previous.streamed) objects.push_back({key, v.size, v.etag, v.mtime_ns});
    std::sort(objects.begin(), objects.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  } else if (directory) {
    // Listed by the bare name, then kept below "name/": no '/' in the query
    // (moto, an S3 emulator, mis-signs an encoded one) at the cost of the
    // rare sibling "name2/..." in the listing.
    absl::StatusOr<std::vector<ObjectInfo>> listed = store.ListVersioned(name, &version);
    if (!listed.ok()) return listed.status();
    for (ObjectInfo& o : *listed) {
      if (absl::StartsWith(o.key, name + "/")) objects.push_back(std::move(o));
    }
    // A key listed twice (an index.txt's repeated line) is fetched once.
    std::sort(objects.begin(), objects.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    objects.erase(std::unique(objects.begin(), objects.end(),
                              [](const ObjectInfo& a, const ObjectInfo& b) { return a.key == b.key; }),
                  objects.end());
    if (objects.empty()) return absl::NotFoundError(absl::StrCat("no objects under ", store.Describe(name + "/")));
  } else {
    absl::StatusOr<ObjectInfo> one = store.Stat(name);
    if (!one.ok()) return one.status();
    objects.push_back(*std::move(one));
  }
  for (const ObjectInfo& o : objects) {
    if (absl::Status s = CheckKey(o.key); !s.ok())
      return absl::Status(s.code(), absl::StrCat(store.root(), ": ", s.message()));
    listing.total_bytes += o.size;
    if (directory && IsShardOf(name, o.key)) listing.shard_bytes += o.size;
  }
  return listing;
}

// Which objects to fetch: those the previous manifest does not vouch for
// (another size or etag, or no such file here); the others are reused.
struct ToFetch {
  std::vector<const ObjectInfo*> wanted;
  int64_t wanted_bytes = 0, reused = 0, reused_bytes = 0;
};

ToFetch PlanFetch(const std::vector<ObjectInfo>& objects, const Manifest& previous, const fs::path& local_root) {
  ToFetch plan;
  for (const ObjectInfo& o : objects) {
    auto old = previous.objects.find(o.key);
    const bool same = old != previous.objects.end() && old->second.size == o.size && old->second.etag == o.etag &&
                      LocalMatches(local_root / o.key, o.size);
    if (same) {
      ++plan.reused;
      plan.reused_bytes += o.size;
    } else {
      plan.wanted.push_back(&o);
      plan.wanted_bytes += o.size;
    }
  }
  return plan;
}

}  // namespace

StoreMirror::StoreMirror(std::unique_ptr<Storage> store, MirrorOptions options, fs::path local_root)
    : store_(std::move(store)), options_(std::move(options)), local_root_(std::move(local_root)) {}

StoreMirror::~StoreMirror() {
  alive_.reset();
  JoinPersisted();
  std::vector<std::thread> read_ahead;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    stop_read_ahead_.store(true);
    read_ahead.swap(read_ahead_threads_);
  }
  for (std::thread& t : read_ahead) t.join();
  absl::MutexLock lock(&mu_);
  for (auto& [key, s] : streamed_) {  // streamed copies live as long as the mirror
    if (s.fd >= 0) ::close(s.fd);
  }
  std::error_code ec;
  if (!stream_root_.empty()) fs::remove_all(stream_root_, ec);
}

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
  // Streamed copies live in a folder of their process's: those of processes
  // gone are removed (a restart fetches its shards again).
  for (const auto& entry : fs::directory_iterator(local / kManifestDir, ec)) {
    const std::string dir = entry.path().filename().string();
    int pid = 0;
    if (!absl::StartsWith(dir, kStreamPrefix) || !absl::SimpleAtoi(dir.substr(strlen(kStreamPrefix)), &pid)) continue;
    if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
  }
  m->stream_root_ = local / kManifestDir / absl::StrCat(kStreamPrefix, ::getpid());
  fs::remove_all(m->stream_root_, ec);
  LOG(INFO) << "store " << m->store_->root() << ": cached in " << local.string() << " ("
            << m->stats_.bytes_cached / 1000000 << " MB held of " << m->options_.cache_bytes / 1000000 << " MB)";
  return m;
}

fs::path StoreMirror::ManifestPath(const std::string& name) const {
  return local_root_ / kManifestDir / (Sha256Hex(name).substr(0, 24) + ".json");
}

MirrorStats StoreMirror::stats() const {
  absl::MutexLock lock(&mu_);
  MirrorStats s = stats_;
  s.streamed_bytes = streamed_bytes_;
  return s;
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
  absl::StatusOr<Listing> listing = ListObjects(*store_, name, directory, stale != nullptr, previous);
  if (!listing.ok()) return listing.status();
  std::vector<ObjectInfo>& objects = listing->objects;
  const std::string& version = listing->version;
  const bool cached_listing = listing->cached;
  std::optional<Held> before;  // what held_ said of `name` before the copy's reservation
  bool committed = false;
  Manifest next;
  next.name = name;
  next.listing_version = version;
  next.used_unix = absl::ToUnixSeconds(absl::Now());
  const int64_t total_bytes = listing->total_bytes, shard_bytes = listing->shard_bytes;
  std::vector<ObjectInfo> stream;  // the directory's shards, left in the store (Hold)
  {
    absl::MutexLock lock(&mu_);
    if (shard_bytes > 0 && (options_.stream_shards || !FitsLocked(name, total_bytes))) {
      for (auto it = objects.begin(); it != objects.end();) {
        if (!IsShardOf(name, it->key)) {
          ++it;
          continue;
        }
        stream.push_back(std::move(*it));
        it = objects.erase(it);
      }
    }
    for (const ObjectInfo& o : objects) next.objects[o.key] = {o.size, o.etag, o.mtime_ns};
    for (const ObjectInfo& o : stream) next.streamed[o.key] = {o.size, o.etag, o.mtime_ns};
    if (absl::Status s = MakeRoom(name, next.bytes()); !s.ok()) return s;
    // Reserved while it is copied: streamed shards do not take its room,
    // and nothing evicts the files it reuses.
    auto it = held_.find(name);
    if (it != held_.end()) before = it->second;
    held_[name] = {std::max(next.bytes(), before ? before->bytes : 0), next.used_unix};
    ensuring_ = name;
  }
  absl::Cleanup unreserve = [this, &name, &before, &committed] {
    absl::MutexLock lock(&mu_);
    ensuring_.clear();
    if (committed) return;
    if (before) {
      held_[name] = *before;
    } else {
      held_.erase(name);
    }
  };
  if (!stream.empty()) {  // the shards' directory, though none of them is here yet
    std::error_code ec;
    fs::create_directories(local_root_ / name, ec);
    if (ec)
      return absl::UnavailableError(absl::StrCat("cache: making ", (local_root_ / name).string(), ": ", ec.message()));
  }
  const ToFetch fetch_plan = PlanFetch(objects, previous, local_root_);
  const std::vector<const ObjectInfo*>& wanted = fetch_plan.wanted;
  const int64_t wanted_bytes = fetch_plan.wanted_bytes, reused = fetch_plan.reused,
                reused_bytes = fetch_plan.reused_bytes;
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
  committed = true;
  if (!stream.empty()) {
    LOG(INFO) << store_->Describe(name) << ": " << stream.size() << " shards (" << shard_bytes / 1000000
              << " MB) stay in the store and are fetched when read"
              << (options_.stream_shards
                      ? " (streamed shards asked for)"
                      : absl::StrCat(" (the dataset's ", total_bytes / 1000000, " MB do not fit in the cache's ",
                                     options_.cache_bytes / 1000000, " MB)"))
              << "; with the global epoch order every server reads every shard: choose shuffle=shards";
  }
  LOG(INFO) << store_->Describe(name) << ": " << objects.size() << " objects, " << wanted.size() << " fetched ("
            << wanted_bytes / 1000000 << " MB in " << absl::ToDoubleSeconds(absl::Now() - start) << " s), " << reused
            << " already cached";
  RecordLocked(name, {next.bytes(), next.used_unix}, before ? before->bytes : 0, std::move(stream),
               {static_cast<int64_t>(wanted.size()), wanted_bytes, reused, reused_bytes});
  return absl::OkStatus();
}

void StoreMirror::RecordLocked(const std::string& name, Held now, int64_t bytes_before, std::vector<ObjectInfo> stream,
                               const CopyCounts& counts) {
  stats_.bytes_cached += now.bytes - bytes_before;
  held_[name] = now;
  used_.insert(name);
  stats_.objects_fetched += counts.fetched;
  stats_.bytes_fetched += counts.fetched_bytes;
  stats_.objects_reused += counts.reused;
  stats_.bytes_reused += counts.reused_bytes;
  std::vector<std::string>& keys = streamed_names_[name];
  MirrorStats::Name& counted = stats_.names[name];
  counted.bytes = now.bytes;
  counted.fetched_bytes += counts.fetched_bytes;
  for (ObjectInfo& o : stream) {
    keys.push_back(o.key);
    counted.bytes += o.size;
    Stream& s = streamed_[o.key];
    s.name = name;
    s.info = std::move(o);
  }
}

bool StoreMirror::FitsLocked(const std::string& name, int64_t bytes) const {
  int64_t reclaimable = 0;  // earlier runs' names, and streamed copies nobody holds
  for (const auto& [n, h] : held_) reclaimable += n == name || n == ensuring_ || used_.count(n) ? 0 : h.bytes;
  for (const auto& [key, s] : streamed_) reclaimable += s.fd >= 0 && s.pins == 0 ? s.info.size : 0;
  return HeldExcept(name) + streamed_bytes_ - reclaimable + bytes <= options_.cache_bytes;
}

int64_t StoreMirror::KeptWhole() const {
  int64_t total = 0;
  for (const auto& [n, h] : held_) total += n == ensuring_ || used_.count(n) ? h.bytes : 0;
  return total;
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
  while (HeldExcept(name) + streamed_bytes_ + bytes > options_.cache_bytes) {
    if (EvictOldestName(name) || EvictStreamed()) continue;
    return absl::ResourceExhaustedError(absl::StrCat(
        store_->Describe(name), " needs ", bytes, " bytes in the cache, which holds ",
        HeldExcept(name) + streamed_bytes_, " bytes of datasets and shards this server has open, of --cache-bytes=",
        options_.cache_bytes, ": raise --cache-bytes or give the cache more room"));
  }
  return absl::OkStatus();
}

bool StoreMirror::EvictOldestName(const std::string& name) {
  // The least recently used name that this process has not opened.
  std::string victim;
  int64_t oldest = INT64_MAX;
  for (const auto& [n, h] : held_) {
    if (n == name || n == ensuring_ || used_.count(n)) continue;
    if (h.used_unix < oldest) {
      oldest = h.used_unix;
      victim = n;
    }
  }
  if (victim.empty()) return false;
  {
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
  return true;
}

}  // namespace stoker
