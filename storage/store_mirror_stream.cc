// StoreMirror's streamed shards (store_mirror.h): the shards of a directory
// too large for the cache (or asked to stream), left in the store and held
// here while they are read, fetched ahead in the epoch's order, and evicted
// when nobody holds them.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "storage/block_fetch.h"
#include "storage/store_mirror.h"

namespace stoker {

namespace fs = std::filesystem;

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

}  // namespace stoker
