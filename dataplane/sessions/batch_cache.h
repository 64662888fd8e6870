// Finished batches shared between sessions with the same data configuration
// (stoker-server --batch-cache-bytes). A batch's bytes depend only on the
// dataset (its fingerprint), the pipeline, dtype and layout, the seed, the
// bad-sample policy and order, the epoch and the batch's sample indices, so
// jobs of a sweep ask for identical batches: the first asker makes a batch,
// askers meanwhile wait for it (one decode however many ask at once), and
// later askers get the kept copy while it is in the cache (least recently
// used batches leave first once the byte bound is reached). Thread-safe.
#ifndef STOKER_DATAPLANE_SESSIONS_BATCH_CACHE_H_
#define STOKER_DATAPLANE_SESSIONS_BATCH_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dataplane/base/server_metrics.h"
#include "dataplane/sessions/stream_session.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

class BatchCache {
 public:
  // `metrics` (nullable) gets stoker_server_batch_cache_*.
  BatchCache(int64_t max_bytes, ServerMetrics* metrics);

  // Everything a session's batches depend on besides epoch and samples.
  static std::string SessionKey(const v1::SessionConfig& config, const std::string& fingerprint);
  static std::string BatchKey(const std::string& session_key, const v1::BatchRequest& request);

  // Called once with the batch another session made, or with null when its
  // maker gave up (cancelled): then the waiter becomes the maker (it makes
  // the batch and calls Finish with the same key; the other waiters wait for
  // it). A joined job gets the batch at the maker's pace: its fair share
  // (weight) does not speed that batch up.
  using Waiter = std::function<void(const FinishedBatch* batch)>;
  enum class Outcome {
    kHit,     // *hit is the kept batch
    kJoined,  // another session is making it: `waiter` runs when it is done
    kMake,    // the caller makes it and then calls Finish(key, ...)
  };
  Outcome Lookup(const std::string& key, FinishedBatch* hit, Waiter waiter);
  // The maker of `key` is done: `batch` is what it made, or null if it gave
  // up. Waiters run (on this thread, no lock held) with it; an OK batch is
  // kept if it fits.
  void Finish(const std::string& key, const FinishedBatch* batch);

  int64_t bytes() const;

 private:
  struct Entry {
    FinishedBatch batch;
    int64_t bytes = 0;
    std::list<std::string>::iterator lru;
  };
  void EvictLocked(int64_t needed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_bytes_;
  ServerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::vector<Waiter>> making_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SESSIONS_BATCH_CACHE_H_
