// The order in which an epoch visits a dataset's samples, and its split into
// batches. A pure function of (seed, epoch, dataset size, batch size): every
// client and server computes the same plan. Thread-compatible value type.
#ifndef STOKER_COMMON_EPOCH_PLAN_H_
#define STOKER_COMMON_EPOCH_PLAN_H_

#include <cstdint>
#include <vector>

namespace stoker {

class EpochPlan {
 public:
  // A shuffled order of [0, num_samples) for (seed, epoch). With drop_last the
  // final partial batch is left out; otherwise it is a shorter last batch.
  //
  // For distributed training, rank r of world_size w takes its share as
  // PyTorch's DistributedSampler does: without drop_last the order is padded
  // by repeating its start up to a multiple of w; with drop_last it is cut to
  // one; rank r takes positions r, r + w, r + 2w, ... Batches are made from
  // that share (the last one shorter, or dropped with drop_last).
  //
  // shuffle = false: index order, the same every epoch (the rest as above).
  EpochPlan(uint64_t seed, int64_t epoch, int64_t num_samples, int64_t batch_size,
            bool drop_last, int rank = 0, int world_size = 1, bool shuffle = true);

  int64_t epoch() const { return epoch_; }
  int64_t num_batches() const;
  // The sample indices of batch b, 0 <= b < num_batches().
  std::vector<int64_t> BatchIndices(int64_t b) const;
  const std::vector<int64_t>& order() const { return order_; }

 private:
  int64_t epoch_;
  int64_t batch_size_;
  bool drop_last_;
  std::vector<int64_t> order_;
};

}  // namespace stoker

#endif  // STOKER_COMMON_EPOCH_PLAN_H_
