#include "server/memory_budget.h"

#include <unistd.h>

#include "glog/logging.h"

namespace stoker {

MemoryBudget::MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes > 0 ? limit_bytes : DefaultLimit()) {}

int64_t MemoryBudget::DefaultLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return int64_t{4} << 30;
  return int64_t{pages} * page / 2;
}

bool MemoryBudget::TryAcquire(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (bytes > limit_ - used_) return false;
  used_ += bytes;
  return true;
}

void MemoryBudget::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_ -= bytes;
  LOG_IF(DFATAL, used_ < 0) << "memory budget released more than it took";
}

int64_t MemoryBudget::used() {
  absl::MutexLock lock(&mu_);
  return used_;
}

}  // namespace stoker
