// StoreMirror: a remote store's datasets kept as complete local copies in a
// bounded cache directory, so that every dataset layout reads them as local
// files (sidecar indexes, pread, damage reports unchanged) and later epochs
// and restarts read nothing remote. Ensure(name) lists the name in the store
// (a dataset's prefix, or one object such as an annotations file), fetches
// what is missing or changed (many objects in flight, each in large ranged
// reads pinned to its ETag) and removes what the store no longer has.
//
// Objects are read in large blocks, many in flight over all of them (a large
// object by many requests at once: block_fetch.h).
// Crash-safe: an object is written to a temporary file and renamed into
// place when whole; the name's manifest (key -> size, ETag) is written last,
// after the cache's filesystem is synced (in the background: sessions read
// the files meanwhile), so neither a SIGKILLed server nor a lost machine
// serves a torn file (without a manifest the next Ensure checks again).
// Bounded: names fetched by earlier runs are evicted, least recently used
// first, to make room; names fetched by this process are never evicted (open
// datasets read them); past the bound Ensure fails with RESOURCE_EXHAUSTED
// naming the sizes.
//
// Streamed shards: a directory whose tar shards (*.tar directly below it) do
// not fit in the room left, or every one with `stream_shards`, is kept with
// its other objects (manifests, sidecar indexes, annotations) whole and its
// shards in the store: Hold(key) fetches a shard when a read needs it (many
// ranged reads in flight, pinned to the version listed) and keeps it while
// held; shards nobody holds are evicted least recently used first when
// another needs the room. Streamed shards live only as long as the process
// (a restart fetches them again; files of an earlier run are removed). Thread-safe: concurrent Ensure calls of one name
// fetch it once; processes sharing a cache directory take turns (an advisory lock on it, held until a copy's manifest
// is written).
#ifndef STOKER_STORAGE_STORE_MIRROR_H_
#define STOKER_STORAGE_STORE_MIRROR_H_

#include <atomic>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/held_object.h"
#include "storage/storage.h"

namespace stoker {

struct MirrorOptions {
  std::filesystem::path cache_dir;           // created if missing
  int64_t cache_bytes = int64_t{256} << 30;  // most bytes of objects kept
  int parallel = 16;                         // ranged reads in flight (over all objects)
  int64_t block_bytes = int64_t{8} << 20;    // bytes per ranged read
  // Stream every directory's tar shards (fetched when read, as HeldObject),
  // not only those of a directory that does not fit.
  bool stream_shards = false;
};

struct MirrorStats {
  int64_t objects_fetched = 0;  // since the mirror was made
  int64_t bytes_fetched = 0;
  int64_t objects_reused = 0;  // found complete and unchanged in the cache
  int64_t bytes_reused = 0;
  int64_t bytes_cached = 0;  // held now, over every name
  int64_t evicted_bytes = 0;
  int64_t streamed_fetches = 0;  // streamed objects fetched by Hold (a shard fetched again after eviction counts again)
  int64_t streamed_hits = 0;     // Hold calls that found the object local (fetched ahead included)
  int64_t streamed_read_ahead = 0;  // streamed objects fetched ahead of their reads (Prefetch)
  int64_t streamed_bytes = 0;       // of streamed objects local (or being fetched) now
  // Per name this process ensured: its bytes in the store (copied whole and
  // streamed), and the bytes fetched for it since (copies and streamed
  // shards, fetched again after eviction included): their ratio over an
  // epoch is how many times the epoch read the dataset from the store.
  struct Name {
    int64_t bytes = 0;
    int64_t fetched_bytes = 0;
  };
  std::map<std::string, Name> names;
  double ensure_seconds = 0;  // time Ensure calls spent waiting for the cache's lock, listing and fetching
};

class StoreMirror {
 public:
  // The store's copies go under cache_dir/<a digest of the store's root>.
  static absl::StatusOr<std::unique_ptr<StoreMirror>> Create(std::unique_ptr<Storage> store, MirrorOptions options);
  // Waits for the copies being made durable (their manifests written).
  ~StoreMirror();

  // The local directory that stands for the store's root.
  const std::filesystem::path& local_root() const { return local_root_; }
  Storage& store() { return *store_; }

  // Brings `name` (a '/'-separated key: a directory's prefix when
  // `directory`, else one object) up to date under local_root(). NOT_FOUND
  // when the store has nothing there; CANCELLED once *cancelled turns true.
  absl::Status Ensure(const std::string& name, bool directory, const std::atomic<bool>* cancelled = nullptr);

  // The objects of `name` (a directory Ensure has brought up to date) kept in
  // the store and fetched by Hold, sorted by key; empty when it was copied whole.
  std::vector<ObjectInfo> Streamed(const std::string& name) const;
  // A streamed object's local copy, fetched first when it is not local (one
  // fetch however many ask at once). Waits while held objects leave no room;
  // RESOURCE_EXHAUSTED when the object is larger than the room the cache has
  // for streamed objects, NOT_FOUND when `key` is not streamed,
  // FAILED_PRECONDITION when the store's object changed since it was listed.
  absl::StatusOr<std::shared_ptr<const HeldObject>> Hold(const std::string& key,
                                                         const std::atomic<bool>* cancelled = nullptr);
  // Starts fetching a streamed object that reads will soon need (read-ahead,
  // on the mirror's own threads; it never waits, evicts only shards read
  // already, and holds at most half the cache in shards not read yet).
  // Returns at once, dropping the hint when the mirror is busy; a later Hold
  // finds the copy, or waits for the fetch under way.
  void Prefetch(const std::string& key);

  MirrorStats stats() const;
  int64_t capacity_bytes() const { return options_.cache_bytes; }
  // What Ensure(name) is doing now, for those waiting on it: e.g.
  // "s3://b/p/train: 120.0 of 900.0 MB copied (13.1 MB/s, 9.1 s)" (the
  // phase's own time), or that another name's copy comes first; empty when
  // no Ensure runs.
  std::string Progress(const std::string& name) const;

  // Ensure as a function (CatalogOptions::fetch); the mirror must outlive it.
  using Fetch =
      std::function<absl::Status(const std::string& name, bool directory, const std::atomic<bool>* cancelled)>;
  Fetch Fetcher() {
    return [this](const std::string& name, bool directory, const std::atomic<bool>* cancelled) {
      return Ensure(name, directory, cancelled);
    };
  }

  // Streamed(name) with Hold, as a function (CatalogOptions::streamed); the
  // mirror must outlive it and every HeldObject.
  std::function<StreamedShards(const std::string& name)> Streamer() {
    return [this](const std::string& name) {
      StreamedShards s;
      s.shards = Streamed(name);
      s.hold = [this](const std::string& key, const std::atomic<bool>* cancelled) { return Hold(key, cancelled); };
      s.prefetch = [this](const std::string& key) { Prefetch(key); };
      return s;
    };
  }

 private:
  StoreMirror(std::unique_ptr<Storage> store, MirrorOptions options, std::filesystem::path local_root);
  // With the cache's lock file open as *lock_fd: a copy's persisting thread
  // takes it over (closing it when done; *lock_fd becomes -1). A cached
  // listing is used only with `stale`, set when it named an object version
  // the store no longer has (then call again without).
  absl::Status EnsureLocked(const std::string& name, bool directory, const std::atomic<bool>* cancelled, bool* stale,
                            int* lock_fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ensure_mu_);
  bool Used(const std::string& name) const;
  // Progress(): the name Ensure works on and what it does ("" when none);
  // the phase "copying" counts fetched_now_ against `bytes`.
  void SetPhase(const std::string& name, const std::string& phase, int64_t bytes = 0);
  void JoinPersisted();
  // Evicts (earlier runs' names, then streamed copies nobody holds) until
  // `bytes` more fit beside what is held except `name`.
  absl::Status MakeRoom(const std::string& name, int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts the least recently used name (other than `name`) that this
  // process has not ensured; false when there is none.
  bool EvictOldestName(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `bytes` of `name` fit once everything evictable is evicted.
  bool FitsLocked(const std::string& name, int64_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t HeldExcept(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `key` is, or is below, a name this process has ensured.
  bool InUse(const std::string& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::filesystem::path ManifestPath(const std::string& name) const;

  const std::unique_ptr<Storage> store_;
  const MirrorOptions options_;
  const std::filesystem::path local_root_;
  absl::Mutex ensure_mu_;  // one Ensure at a time (each fetches many objects in parallel)

  mutable absl::Mutex mu_;
  struct Held {
    int64_t bytes = 0;
    int64_t used_unix = 0;  // when it was last ensured (the eviction order)
  };
  std::map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);     // as the manifests on disk say
  std::set<std::string> used_ ABSL_GUARDED_BY(mu_);           // ensured by this process
  std::vector<std::thread> persisting_ ABSL_GUARDED_BY(mu_);  // syncing copies, then writing their manifests
  MirrorStats stats_ ABSL_GUARDED_BY(mu_);
  struct Phase {
    std::string name, what;
    int64_t bytes = 0;
    absl::Time since;
  };
  Phase phase_ ABSL_GUARDED_BY(mu_);
  // What one Ensure copied and found already here.
  struct CopyCounts {
    int64_t fetched = 0, fetched_bytes = 0, reused = 0, reused_bytes = 0;
  };
  // A finished Ensure of `name`: held at `now` (its room was `bytes_before`
  // while it was copied), its streamed shards kept for Hold, the stats.
  void RecordLocked(const std::string& name, Held now, int64_t bytes_before, std::vector<ObjectInfo> stream,
                    const CopyCounts& counts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::atomic<int64_t> fetched_now_{0};  // bytes of the copy under way

  // Streamed objects (Hold), by key.
  struct Stream {
    ObjectInfo info;
    int fd = -1;   // open while local
    int pins = 0;  // HeldObjects alive
    bool fetching = false;
    int64_t used = 0;     // streamed_clock_ at the last Hold (the eviction order)
    absl::Status failed;  // the store's answer when its object changed or went
    std::string name;     // the directory it belongs to
    bool ahead = false;   // fetched by the read-ahead and not read since (evicted last)
  };
  // Bytes of the names this process keeps whole (ensured, or being ensured).
  int64_t KeptWhole() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With mu_ held (released while the bytes come): fetches `s` when it is
  // neither local nor being fetched. With `wait`, into room made by evicting
  // earlier runs' names and unheld shards, waiting for held ones' release;
  // without (the read-ahead), into room there is beside every shard held or
  // kept, else not at all (OK without a copy). *fetched: this call made it.
  absl::Status FetchStreamedLocked(const std::string& key, Stream& s, const std::atomic<bool>* cancelled, bool wait,
                                   bool* fetched) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadAhead();  // a read-ahead thread: fetches what Prefetch queued
  // Evicts the least recently used local streamed copy nobody holds, those
  // fetched ahead and not read yet last (never with `keep_ahead`); false
  // when there is none.
  bool EvictStreamed(bool keep_ahead = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PrefetchLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(const std::string& key);
  std::map<std::string, Stream> streamed_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<std::string>> streamed_names_ ABSL_GUARDED_BY(mu_);  // name -> its streamed keys
  int64_t streamed_bytes_ ABSL_GUARDED_BY(mu_) = 0;                                      // local and being fetched
  int64_t streamed_clock_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;  // a HeldObject went since the waiter looked
  std::string ensuring_ ABSL_GUARDED_BY(mu_);   // the name Ensure copies now (reserved in held_; never evicted)
  // Streamed copies: local_root_/.stoker-mirror/stream-<pid>/<key>, this
  // process's alone (others sharing the cache keep their own).
  std::filesystem::path stream_root_;
  std::shared_ptr<char> alive_ = std::make_shared<char>();  // reset first by the destructor (HeldObject's release)
  static constexpr int kReadAheadThreads = 4;               // shards fetched ahead at once
  static constexpr int kMaxReadAheadQueue = 256;            // keys queued at most (more are dropped: reads fetch them)
  std::deque<std::string> read_ahead_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> queued_ ABSL_GUARDED_BY(mu_);  // the keys in read_ahead_
  int64_t ahead_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of copies fetched ahead and not read yet (at most half the cache)
  std::vector<std::thread> read_ahead_threads_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> stop_read_ahead_{false};
};

}  // namespace stoker

#endif  // STOKER_STORAGE_STORE_MIRROR_H_
