// A fixed set of numbered slots handed out one at a time; Acquire blocks
// while all are in use. SlotLease gives a slot back when destroyed. Used for
// the device (or fallback) output buffers. Thread-safe.
#ifndef STOKER_CLIENT_SLOT_RING_H_
#define STOKER_CLIENT_SLOT_RING_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/client_metrics.h"

namespace stoker {

class SlotRing {
 public:
  static std::shared_ptr<SlotRing> Create(int slots) { return std::shared_ptr<SlotRing>(new SlotRing(slots)); }
  // A free slot; blocks until one is. Updates the occupancy gauges.
  int Acquire(ClientMetrics* metrics);
  void Release(int slot, ClientMetrics* metrics);
  int size() const { return static_cast<int>(free_count_size_); }

 private:
  explicit SlotRing(int slots);
  const size_t free_count_size_;
  absl::Mutex mu_;
  std::vector<bool> in_use_ ABSL_GUARDED_BY(mu_);
  int used_ ABSL_GUARDED_BY(mu_) = 0;
};

class SlotLease {
 public:
  // `before_reuse` runs when the lease ends (e.g. wait for the slot's copy).
  SlotLease(std::shared_ptr<SlotRing> ring, int slot, ClientMetrics* metrics, std::function<void()> before_reuse = {})
      : ring_(std::move(ring)), slot_(slot), metrics_(metrics), before_reuse_(std::move(before_reuse)) {}
  ~SlotLease() {
    if (before_reuse_) before_reuse_();
    ring_->Release(slot_, metrics_);
  }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  int slot() const { return slot_; }

 private:
  std::shared_ptr<SlotRing> ring_;
  int slot_;
  ClientMetrics* metrics_;
  std::function<void()> before_reuse_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_SLOT_RING_H_
