#include "client/slot_ring.h"

namespace stoker {

SlotRing::SlotRing(int slots) : free_count_size_(static_cast<size_t>(slots)), in_use_(static_cast<size_t>(slots)) {}

int SlotRing::Acquire(ClientMetrics* metrics) {
  absl::MutexLock lock(&mu_);
  auto free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return used_ < static_cast<int>(in_use_.size()); };
  mu_.Await(absl::Condition(&free));
  size_t slot = 0;
  while (in_use_[slot]) ++slot;
  in_use_[slot] = true;
  ++used_;
  if (metrics) {
    metrics->RingSlots("in_use").Set(used_);
    metrics->RingSlots("free").Set(static_cast<double>(in_use_.size()) - used_);
  }
  return static_cast<int>(slot);
}

void SlotRing::Release(int slot, ClientMetrics* metrics) {
  absl::MutexLock lock(&mu_);
  in_use_[static_cast<size_t>(slot)] = false;
  --used_;
  if (metrics) {
    metrics->RingSlots("in_use").Set(used_);
    metrics->RingSlots("free").Set(static_cast<double>(in_use_.size()) - used_);
  }
}

}  // namespace stoker
