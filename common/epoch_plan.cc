#include "common/epoch_plan.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "common/rng.h"

namespace stoker {

EpochPlan::EpochPlan(uint64_t seed, int64_t epoch, int64_t num_samples, int64_t batch_size,
                     bool drop_last, int rank, int world_size, bool shuffle)
    : epoch_(epoch), batch_size_(std::max<int64_t>(1, batch_size)), drop_last_(drop_last) {
  order_.resize(static_cast<size_t>(std::max<int64_t>(0, num_samples)));
  std::iota(order_.begin(), order_.end(), int64_t{0});
  Rng rng = Rng::ForEpoch(seed, epoch);
  // Fisher-Yates with our own platform-independent generator.
  for (int64_t i = static_cast<int64_t>(order_.size()) - 1; shuffle && i > 0; --i) {
    std::swap(order_[i], order_[rng.UniformInt(0, i)]);
  }
  if (world_size > 1) {
    const int64_t n = static_cast<int64_t>(order_.size());
    const int64_t per_rank = drop_last ? n / world_size : (n + world_size - 1) / world_size;
    std::vector<int64_t> share;
    share.reserve(static_cast<size_t>(per_rank));
    for (int64_t k = 0; k < per_rank && n > 0; ++k) {
      share.push_back(order_[static_cast<size_t>((rank + k * world_size) % n)]);  // padding wraps to the start
    }
    order_ = std::move(share);
  }
}

int64_t EpochPlan::num_batches() const {
  const int64_t n = static_cast<int64_t>(order_.size());
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

std::vector<int64_t> EpochPlan::BatchIndices(int64_t b) const {
  const int64_t n = static_cast<int64_t>(order_.size());
  const int64_t begin = std::min(n, b * batch_size_);
  const int64_t end = std::min(n, begin + batch_size_);
  return std::vector<int64_t>(order_.begin() + begin, order_.begin() + end);
}

}  // namespace stoker
