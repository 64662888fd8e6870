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
    for (const auto& [key, v] : previous.streamed) objects.push_back({key, v.size, v.etag, v.mtime_ns});
    std::sort(objects.begin(), objects.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
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
  std::optional<Held> before;  // what held_ said of `name` before the copy's reservation
  bool committed = false;
  Manifest next;
  next.name = name;
  next.listing_version = version;
  next.used_unix = absl::ToUnixSeconds(absl::Now());
  int64_t total_bytes = 0, shard_bytes = 0;
  for (const ObjectInfo& o : objects) {
    if (absl::Status s = CheckKey(o.key); !s.ok())
      return absl::Status(s.code(), absl::StrCat(store_->root(), ": ", s.message()));
    total_bytes += o.size;
    if (directory && IsShardOf(name, o.key)) shard_bytes += o.size;
  }
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
  stats_.bytes_cached += next.bytes() - (before ? before->bytes : 0);
  held_[name] = {next.bytes(), next.used_unix};
  committed = true;
  used_.insert(name);
  stats_.objects_fetched += static_cast<int64_t>(wanted.size());
  stats_.bytes_fetched += wanted_bytes;
  stats_.objects_reused += reused;
  stats_.bytes_reused += reused_bytes;
  std::vector<std::string>& keys = streamed_names_[name];
  MirrorStats::Name& counted = stats_.names[name];
  counted.bytes = next.bytes();
  counted.fetched_bytes += wanted_bytes;
  for (ObjectInfo& o : stream) {
    keys.push_back(o.key);
    counted.bytes += o.size;
    Stream& s = streamed_[o.key];
    s.name = name;
    s.info = std::move(o);
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
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
            << wanted_bytes / 1000000 << " MB in " << seconds << " s), " << reused << " already cached";
  return absl::OkStatus();
}

bool StoreMirror::FitsLocked(const std::string& name, int64_t bytes) const {
  int64_t reclaimable = 0;  // earlier runs' names, and streamed copies nobody holds
  for (const auto& [n, h] : held_) reclaimable += n == name || n == ensuring_ || used_.count(n) ? 0 : h.bytes;
  for (const auto& [key, s] : streamed_) reclaimable += s.fd >= 0 && s.pins == 0 ? s.info.size : 0;
  return HeldExcept(name) + streamed_bytes_ - reclaimable + bytes <= options_.cache_bytes;
}

std::vector<ObjectInfo> StoreMirror::Streamed(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  std::vector<ObjectInfo> out;
  auto it = streamed_names_.find(name);
  if (it == streamed_names_.end()) return out;
  for (const std::string& key : it->second) out.push_back(streamed_.at(key).info);
  return out;
}

bool StoreMirror::EvictStreamed(bool keep_ahead) {
  auto victim = streamed_.end();
  for (auto it = streamed_.begin(); it != streamed_.end(); ++it) {
    const Stream& s = it->second;
    if (s.fd < 0 || s.pins > 0 || (keep_ahead && s.ahead)) continue;
    if (victim == streamed_.end() ||
        std::make_pair(s.ahead, s.used) < std::make_pair(victim->second.ahead, victim->second.used)) {
      victim = it;
    }
  }
  if (victim == streamed_.end()) return false;
  if (victim->second.ahead) {
    victim->second.ahead = false;
    ahead_bytes_ -= victim->second.info.size;
  }
  ::close(victim->second.fd);
  victim->second.fd = -1;
  std::error_code ec;
  fs::remove(stream_root_ / victim->first, ec);
  streamed_bytes_ -= victim->second.info.size;
  stats_.evicted_bytes += victim->second.info.size;
  return true;
}

void StoreMirror::Release(const std::string& key) {
  absl::MutexLock lock(&mu_);
  --streamed_[key].pins;
  released_ = true;
}

absl::Status StoreMirror::FetchStreamedLocked(const std::string& key, Stream& s, const std::atomic<bool>* cancelled,
                                              bool wait, bool* fetched) {
  auto stop = [cancelled] { return cancelled != nullptr && cancelled->load(std::memory_order_relaxed); };
  // Room: earlier runs' names, then streamed copies nobody holds; else
  // wait for a held one's release (a read holds a shard only while it reads).
  while (HeldExcept("") + streamed_bytes_ + s.info.size > options_.cache_bytes) {
    if (EvictOldestName("") || EvictStreamed(/*keep_ahead=*/!wait)) continue;
    // Never room, however many are released: the names this process keeps whole leave too little.
    const int64_t room = options_.cache_bytes - KeptWhole();
    if (s.info.size > room) {
      return absl::ResourceExhaustedError(absl::StrCat(
          store_->Describe(key), " holds ", s.info.size, " bytes; the cache (--cache-bytes=", options_.cache_bytes,
          ") has ", room, " bytes for streamed shards beside the datasets it keeps whole: raise --cache-bytes"));
    }
    if (!wait) return absl::OkStatus();
    if (stop()) return absl::CancelledError(absl::StrCat("fetching ", store_->Describe(key), " cancelled"));
    released_ = false;
    mu_.AwaitWithTimeout(absl::Condition(&released_), absl::Milliseconds(100));
  }
  if (s.fd >= 0 || s.fetching) return absl::OkStatus();  // fetched (or being fetched) by another caller meanwhile
  if (!wait && ahead_bytes_ + s.info.size > options_.cache_bytes / 2) return absl::OkStatus();  // ahead enough
  s.fetching = true;
  streamed_bytes_ += s.info.size;
  const ObjectInfo info = s.info;
  mu_.Unlock();
  BlockFetchOptions fetch;
  fetch.block_bytes = options_.block_bytes;
  // The read-ahead's threads share --fetch-parallel's reads in flight.
  fetch.parallel = wait ? options_.parallel : std::max(1, options_.parallel / kReadAheadThreads);
  absl::Status status = FetchObjects(*store_, {&info}, stream_root_, fetch, cancelled);
  int fd = -1;
  if (status.ok()) {
    fd = ::open((stream_root_ / key).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      status = absl::UnavailableError(
          absl::StrCat("cache: opening ", (stream_root_ / key).string(), ": ", std::strerror(errno)));
      std::error_code ec;
      fs::remove(stream_root_ / key, ec);
    }
  }
  mu_.Lock();
  s.fetching = false;
  if (!status.ok()) {
    streamed_bytes_ -= info.size;
    // A version the store no longer has (or no object): every later read
    // fails at once, without asking the store again.
    if (absl::IsFailedPrecondition(status) || absl::IsNotFound(status)) s.failed = status;
    return status;
  }
  s.fd = fd;
  s.used = ++streamed_clock_;
  ++stats_.objects_fetched;
  if (wait) {
    ++stats_.streamed_fetches;
  } else {
    s.ahead = true;
    ahead_bytes_ += info.size;
    ++stats_.streamed_read_ahead;
  }
  stats_.bytes_fetched += info.size;
  stats_.names[s.name].fetched_bytes += info.size;
  *fetched = true;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const HeldObject>> StoreMirror::Hold(const std::string& key,
                                                                    const std::atomic<bool>* cancelled) {
  auto stop = [cancelled] { return cancelled != nullptr && cancelled->load(std::memory_order_relaxed); };
  absl::MutexLock lock(&mu_);
  auto it = streamed_.find(key);
  if (it == streamed_.end()) {
    return absl::NotFoundError(absl::StrCat(store_->Describe(key), " is not a streamed object of this cache"));
  }
  Stream& s = it->second;
  bool fetched_here = false;
  for (;;) {
    while (s.fetching && !stop()) {  // another caller (or the read-ahead) fetches it: wait for that copy
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](Stream* x) { return !x->fetching; }, &s),
                           absl::Milliseconds(100));
    }
    if (stop()) return absl::CancelledError(absl::StrCat("fetching ", store_->Describe(key), " cancelled"));
    if (s.fd >= 0) {
      ++s.pins;
      s.used = ++streamed_clock_;
      if (s.ahead) {  // read now: evicted in its turn
        s.ahead = false;
        ahead_bytes_ -= s.info.size;
      }
      if (!fetched_here) ++stats_.streamed_hits;
      // A handle released after the mirror went (which its users must not
      // let happen) touches nothing.
      return std::make_shared<const HeldObject>(s.fd, stream_root_ / key, s.info,
                                                [this, key, alive = std::weak_ptr<char>(alive_)] {
                                                  if (alive.lock()) Release(key);
                                                });
    }
    if (!s.failed.ok()) return s.failed;  // the store's object changed or went: it stays unreadable
    if (absl::Status f = FetchStreamedLocked(key, s, cancelled, /*wait=*/true, &fetched_here); !f.ok()) return f;
  }
}

void StoreMirror::Prefetch(const std::string& key) {
  // A hint on a request's path: dropped when the mirror is busy (evicting,
  // or another caller's bookkeeping); a read fetches the shard then.
  if (!mu_.TryLock()) return;
  PrefetchLocked(key);
  mu_.Unlock();
}

void StoreMirror::PrefetchLocked(const std::string& key) {
  // Queue full: reads ask for more than the read-ahead fetches.
  if (stopping_ || static_cast<int>(read_ahead_.size()) >= kMaxReadAheadQueue || queued_.count(key)) return;
  auto it = streamed_.find(key);
  if (it == streamed_.end() || it->second.fd >= 0 || it->second.fetching || !it->second.failed.ok()) return;
  read_ahead_.push_back(key);
  queued_.insert(key);
  if (read_ahead_threads_.empty()) {
    for (int i = 0; i < kReadAheadThreads; ++i) read_ahead_threads_.emplace_back([this] { ReadAhead(); });
  }
}

void StoreMirror::ReadAhead() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    mu_.Await(absl::Condition(
        +[](StoreMirror* m) ABSL_NO_THREAD_SAFETY_ANALYSIS { return m->stopping_ || !m->read_ahead_.empty(); }, this));
    if (stopping_) return;
    const std::string key = std::move(read_ahead_.front());
    read_ahead_.pop_front();
    queued_.erase(key);
    Stream& s = streamed_.at(key);
    if (s.fd >= 0 || s.fetching || !s.failed.ok()) continue;
    bool fetched = false;
    // Only into room there is now: the read-ahead never waits for held shards.
    const absl::Status f = FetchStreamedLocked(key, s, &stop_read_ahead_, /*wait=*/false, &fetched);
    if (!f.ok() && !absl::IsCancelled(f)) LOG(WARNING) << "read-ahead of " << store_->Describe(key) << ": " << f;
  }
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
