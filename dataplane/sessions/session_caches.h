// A session's diagnostic caches (stoker.proto's CacheMode), held apart from
// the session that fills them: CACHE_BATCH keeps the first finished batch,
// CACHE_RAW and CACHE_DECODED keep a sample's encoded bytes or decoded image
// in one of kSlots slots (index % kSlots). The bytes held come from the
// server's in-flight budget and are bounded per session; once either says
// no, the cache is full and later samples reuse the filled slots (the
// throughput ceilings the caches measure need the work skipped, not the
// samples right). Thread-safe.
#ifndef STOKER_DATAPLANE_SESSIONS_SESSION_CACHES_H_
#define STOKER_DATAPLANE_SESSIONS_SESSION_CACHES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <opencv2/core.hpp>
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dataplane/sessions/memory_budget.h"

namespace stoker {

class SessionCaches {
 public:
  static constexpr int64_t kSlots = 64;  // load-bearing: see CacheMode in stoker.proto

  // `budget` (not null) lends the bytes; `max_bytes` bounds this session's
  // share; `what` names the session and its mode in the log line when full.
  SessionCaches(MemoryBudget* budget, int64_t max_bytes, std::string what);
  // Gives the bytes held back to the budget.
  ~SessionCaches();
  SessionCaches(const SessionCaches&) = delete;
  SessionCaches& operator=(const SessionCaches&) = delete;

  // CACHE_BATCH: the kept batch's buffer when it holds `samples` samples
  // (shared and never written again), else null; Keep keeps the first one.
  std::shared_ptr<const std::string> FindBatch(int64_t samples) const;
  void KeepBatch(std::shared_ptr<const std::string> data, int64_t samples);

  // CACHE_RAW: the sample's slot's bytes, or null; Keep fills its slot.
  std::shared_ptr<const std::string> FindRaw(int64_t index) const;
  void KeepRaw(int64_t index, std::shared_ptr<const std::string> bytes);
  // CACHE_DECODED: the sample's slot's image, or an empty one.
  cv::Mat FindDecoded(int64_t index) const;
  void KeepDecoded(int64_t index, const cv::Mat& image);

 private:
  template <typename T>
  const T* FindLocked(const std::map<int64_t, T>& cache, int64_t index) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename T>
  void KeepLocked(std::map<int64_t, T>& cache, int64_t index, T value, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  MemoryBudget* const budget_;
  const int64_t max_bytes_;
  const std::string what_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const std::string> batch_ ABSL_GUARDED_BY(mu_);  // CACHE_BATCH
  int64_t batch_samples_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, std::shared_ptr<const std::string>> raw_ ABSL_GUARDED_BY(mu_);  // slot -> bytes
  std::map<int64_t, cv::Mat> decoded_ ABSL_GUARDED_BY(mu_);                         // slot -> image
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;                                          // taken from budget_
  bool full_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SESSIONS_SESSION_CACHES_H_
