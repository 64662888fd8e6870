#include "client/device/slot_ring.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace stoker {

SlotRing::SlotRing(int slots, int max_slots, ClientMetrics* metrics)
    : max_slots_(static_cast<size_t>(std::max(slots, max_slots))),
      metrics_(metrics),
      in_use_(static_cast<size_t>(slots)) {}

absl::StatusOr<int> SlotRing::Acquire(absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return used_ < static_cast<int>(in_use_.size()) || in_use_.size() < max_slots_;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&available), wait)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("all ", in_use_.size(), " tensor slots are still held after ", absl::FormatDuration(wait),
                     "; release (delete) batches you no longer need, or allow more slots"));
  }
  size_t slot = 0;
  while (slot < in_use_.size() && in_use_[slot]) ++slot;
  if (slot == in_use_.size()) in_use_.push_back(false);
  in_use_[slot] = true;
  ++used_;
  Publish();
  return static_cast<int>(slot);
}

void SlotRing::Release(int slot) {
  absl::MutexLock lock(&mu_);
  in_use_[static_cast<size_t>(slot)] = false;
  --used_;
  Publish();
}

void SlotRing::DetachMetrics() {
  absl::MutexLock lock(&mu_);
  metrics_ = nullptr;
}

int SlotRing::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(in_use_.size());
}

void SlotRing::Publish() const {
  if (!metrics_) return;
  metrics_->RingSlots("in_use").Set(used_);
  metrics_->RingSlots("free").Set(static_cast<double>(in_use_.size()) - used_);
}

}  // namespace stoker
