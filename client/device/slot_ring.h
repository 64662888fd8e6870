// A set of numbered slots handed out one at a time, for the device (or
// fallback) output buffers. The ring starts with `slots` and grows up to
// `max_slots` while every slot is held (a training step may keep several
// batches alive); past that, Acquire waits for a release. SlotLease gives a
// slot back when destroyed, after running its release hook (e.g. ordering the
// slot's next copy after the consumer's reads). Thread-safe.
#ifndef STOKER_CLIENT_DEVICE_SLOT_RING_H_
#define STOKER_CLIENT_DEVICE_SLOT_RING_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/client_metrics.h"

namespace stoker {

class SlotRing {
 public:
  // max_slots below slots means slots (a fixed ring). `metrics` (nullable)
  // gets the occupancy gauges until DetachMetrics.
  static std::shared_ptr<SlotRing> Create(int slots, int max_slots = 0, ClientMetrics* metrics = nullptr) {
    return std::shared_ptr<SlotRing>(new SlotRing(slots, max_slots, metrics));
  }
  // A free slot (the lowest), a new one while the ring may grow, else waits
  // up to `wait` for a release: RESOURCE_EXHAUSTED then, naming the count.
  absl::StatusOr<int> Acquire(absl::Duration wait = absl::InfiniteDuration());
  void Release(int slot);
  // Stops updating the gauges: the metrics' owner is going away while
  // tensors (leases) may live on.
  void DetachMetrics();
  int size() const;  // slots so far

 private:
  SlotRing(int slots, int max_slots, ClientMetrics* metrics);
  void Publish() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_slots_;
  mutable absl::Mutex mu_;
  ClientMetrics* metrics_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> in_use_ ABSL_GUARDED_BY(mu_);
  int used_ ABSL_GUARDED_BY(mu_) = 0;
};

class SlotLease {
 public:
  // Runs with the consumer stream (see set_consumer_stream) when the lease
  // ends, before the slot goes back to the ring.
  using ReleaseHook = std::function<void(void* consumer_stream)>;
  SlotLease(std::shared_ptr<SlotRing> ring, int slot, ReleaseHook on_release = {})
      : ring_(std::move(ring)), slot_(slot), on_release_(std::move(on_release)) {}
  ~SlotLease() {
    if (on_release_) on_release_(consumer_stream_);
    ring_->Release(slot_);
  }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  int slot() const { return slot_; }
  // The stream (a cudaStream_t) whose queued work reads the slot: its next
  // copy waits for that work. Null (default): the legacy default stream.
  void set_consumer_stream(void* stream) { consumer_stream_ = stream; }

 private:
  std::shared_ptr<SlotRing> ring_;
  int slot_;
  ReleaseHook on_release_;
  void* consumer_stream_ = nullptr;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_DEVICE_SLOT_RING_H_
