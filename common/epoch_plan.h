// The order in which an epoch visits a dataset's samples, and its split into
// batches. A pure function of (seed, epoch, dataset size, batch size): every
// client and server computes the same plan. Thread-compatible value type.
#ifndef STOKER_COMMON_EPOCH_PLAN_H_
#define STOKER_COMMON_EPOCH_PLAN_H_

#include <cstdint>
#include <vector>

namespace stoker {

// How a dataset's samples lie in shards, for the shard-aware order: shard i
// holds the next sizes[i] sample indices (shard 0 starts at 0), and `window`
// shards are shuffled together (issue 50).
inline constexpr int kDefaultShardWindow = 4;
inline constexpr int kDefaultShardLanes = 12;  // dealt evenly over 1, 2, 3, 4, 6 or 12 servers
struct ShardLayout {
  std::vector<int64_t> sizes;
  int window = kDefaultShardWindow;
  // Windows read at once: the order takes blocks of batch_size x world_size
  // samples from `lanes` windows in turn, so that consecutive batches come
  // from different windows and each server of a pool can work on its own.
  int lanes = kDefaultShardLanes;
};

// True when the layout's shards (each of at least one sample) add up to
// num_samples and its window is at least 1.
bool LayoutCovers(const ShardLayout& layout, int64_t num_samples);
// The layout of `sizes` with `window` shards per window (<= 0: the default).
ShardLayout MakeShardLayout(std::vector<int64_t> sizes, int window);
// The window a session's order uses: 0 in index order or the global order,
// else shard_window or its default (for comparing saved positions).
int EffectiveShardWindow(bool sequential, bool shard_aware, int shard_window);

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
  //
  // `shards` (when given, with sizes that add up to num_samples, and
  // shuffle): the shard-aware order. The shards are shuffled by (seed,
  // epoch) and taken `window` at a time; the samples of each window are
  // shuffled among themselves. The order is made of blocks of batch_size x
  // world_size samples (one batch of every rank) taken from `lanes` windows
  // in turn (each lane has its windows, dealt to the lane with the fewest
  // samples; a block may straddle two windows of a lane). A lane that runs
  // out mid-block hands the rest of the block to the next lane, which fills
  // it from the fullest shards of its last window (moved ahead; such a
  // shard is then read by both lanes' servers), and each lane's last two
  // blocks are grouped by shard. A server that makes a lane's batches reads
  // each of its shards about once. The rest (ranks, batches) as above.
  // Otherwise the global order.
  EpochPlan(uint64_t seed, int64_t epoch, int64_t num_samples, int64_t batch_size, bool drop_last, int rank = 0,
            int world_size = 1, bool shuffle = true, const ShardLayout* shards = nullptr);

  int64_t epoch() const { return epoch_; }
  int64_t num_batches() const;
  // The sample indices of batch b, 0 <= b < num_batches().
  std::vector<int64_t> BatchIndices(int64_t b) const;
  const std::vector<int64_t>& order() const { return order_; }
  // The shard window of batch b's first sample (the server that reads those
  // shards should make it); -1 in the global order.
  int64_t BatchWindow(int64_t b) const;
  // The lane of batch b's window (0..lanes-1): a rank's scheduler gives each
  // of its servers its own lanes; -1 in the global order.
  int64_t BatchLane(int64_t b) const;
  bool shard_aware() const { return !windows_.empty(); }

 private:
  int64_t epoch_;
  int64_t batch_size_;
  bool drop_last_;
  std::vector<int64_t> order_;
  std::vector<int32_t> windows_;       // per position of order_, in the shard-aware order
  std::vector<int32_t> window_lanes_;  // per window
};

}  // namespace stoker

#endif  // STOKER_COMMON_EPOCH_PLAN_H_
