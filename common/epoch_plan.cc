#include "common/epoch_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "common/rng.h"

namespace stoker {

namespace {

template <typename T>
void Shuffle(std::vector<T>& v, Rng& rng) {  // Fisher-Yates with our own platform-independent generator
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) {
    std::swap(v[static_cast<size_t>(i)], v[static_cast<size_t>(rng.UniformInt(0, i))]);
  }
}

// The shard of sample i, `start[s]` being shard s's first sample index (any
// value that orders samples by shard: the shard's index plus one).
int64_t ShardOf(const std::vector<int64_t>& start, int64_t i) {
  return std::upper_bound(start.begin(), start.end(), i) - start.begin();
}

// The shards of members[from..] that hold the most of them, in that order,
// until they hold `count` (fewer when there are not so many).
std::set<int64_t> FullestShards(const std::vector<int64_t>& members, size_t from, int64_t count,
                                const std::vector<int64_t>& start) {
  std::map<int64_t, int64_t> left_of;
  for (size_t k = from; k < members.size(); ++k) {
    ++left_of[ShardOf(start, members[k])];
  }
  std::vector<std::pair<int64_t, int64_t>> by_count;  // (-members, shard): fullest first, ties by shard
  for (const auto& [shard, n] : left_of) by_count.emplace_back(-n, shard);
  std::sort(by_count.begin(), by_count.end());
  std::set<int64_t> chosen;
  int64_t covered = 0;
  for (const auto& [minus_n, shard] : by_count) {
    if (covered >= count) break;
    chosen.insert(shard);
    covered -= minus_n;
  }
  return chosen;
}

// A lane ran out `count` samples short of a block; the next lane completes it
// from as few shards as it can: `count` samples of the fullest shards of its
// last window (moved to the front of its current one, `current` from `at`),
// or when the current window is its last, of that window's fullest shards.
// The block's server then reads a shard or two of the other lane's instead
// of all of its window's.
void Borrow(std::vector<int64_t>& current, size_t at, std::vector<int64_t>* last, int64_t count,
            const std::vector<int64_t>& start) {
  if (last == nullptr) {
    const std::set<int64_t> chosen = FullestShards(current, at, count, start);
    std::stable_partition(current.begin() + static_cast<std::ptrdiff_t>(at), current.end(),
                          [&](int64_t i) { return chosen.count(ShardOf(start, i)) > 0; });
    return;
  }
  const std::set<int64_t> chosen = FullestShards(*last, 0, count, start);
  std::vector<int64_t> moved, kept;
  for (int64_t i : *last) {
    (static_cast<int64_t>(moved.size()) < count && chosen.count(ShardOf(start, i)) ? moved : kept).push_back(i);
  }
  *last = std::move(kept);
  current.insert(current.begin() + static_cast<std::ptrdiff_t>(at), moved.begin(), moved.end());
}

}  // namespace

bool LayoutCovers(const ShardLayout& shards, int64_t num_samples) {
  if (shards.sizes.empty() || shards.window < 1) return false;
  int64_t total = 0;
  for (int64_t n : shards.sizes) {
    if (n < 1 || n > num_samples - total) return false;  // no overflow: total stays <= num_samples
    total += n;
  }
  return total == num_samples;
}

ShardLayout MakeShardLayout(std::vector<int64_t> sizes, int window) {
  ShardLayout layout;
  layout.sizes = std::move(sizes);
  if (window > 0) layout.window = window;
  return layout;
}

int EffectiveShardWindow(bool sequential, bool shard_aware, int shard_window) {
  if (sequential || !shard_aware) return 0;
  return shard_window > 0 ? shard_window : kDefaultShardWindow;
}

EpochPlan::EpochPlan(uint64_t seed, int64_t epoch, int64_t num_samples, int64_t batch_size, bool drop_last, int rank,
                     int world_size, bool shuffle, const ShardLayout* shards)
    : epoch_(epoch), batch_size_(std::max<int64_t>(1, batch_size)), drop_last_(drop_last) {
  num_samples = std::max<int64_t>(0, num_samples);
  if (shuffle && shards != nullptr && LayoutCovers(*shards, num_samples)) {
    const size_t count = shards->sizes.size();
    std::vector<int64_t> start(count, 0);
    for (size_t i = 1; i < count; ++i) start[i] = start[i - 1] + shards->sizes[i - 1];
    std::vector<int64_t> shard_order(count);
    std::iota(shard_order.begin(), shard_order.end(), int64_t{0});
    Rng rng = Rng::ForEpoch(seed, epoch);
    Shuffle(shard_order, rng);
    // The windows, each shuffled with its own stream from (seed, epoch, window).
    const size_t window = static_cast<size_t>(shards->window);
    std::vector<std::vector<int64_t>> windows;
    for (size_t first = 0; first < count; first += window) {
      std::vector<int64_t> members;
      for (size_t j = first; j < std::min(count, first + window); ++j) {
        const int64_t s = shard_order[j];
        for (int64_t i = 0; i < shards->sizes[static_cast<size_t>(s)]; ++i) {
          members.push_back(start[static_cast<size_t>(s)] + i);
        }
      }
      Rng within = Rng::ForEpoch(seed + 0x9E3779B97F4A7C15ull * (windows.size() + 1), epoch);
      Shuffle(members, within);
      windows.push_back(std::move(members));
    }
    // Each window goes to the lane with the fewest samples so far (the lanes
    // advance together), in the windows' order.
    const size_t lane_count = std::min(windows.size(), static_cast<size_t>(std::max(1, shards->lanes)));
    std::vector<std::vector<size_t>> lane_windows(lane_count);
    std::vector<int64_t> lane_samples(lane_count, 0);
    for (size_t w = 0; w < windows.size(); ++w) {
      const size_t l =
          static_cast<size_t>(std::min_element(lane_samples.begin(), lane_samples.end()) - lane_samples.begin());
      lane_windows[l].push_back(w);
      window_lanes_.push_back(static_cast<int32_t>(l));
      lane_samples[l] += static_cast<int64_t>(windows[w].size());
    }
    const int64_t block = batch_size_ * std::max(1, world_size);
    // Each lane's last two blocks' worth of samples grouped by shard (in
    // their shuffled order within a shard): the lanes end about together,
    // and the blocks that straddle two lanes at the end then hold a shard or
    // two of the other lane's instead of a few samples of each of its shards.
    for (const std::vector<size_t>& its : lane_windows) {
      std::vector<int64_t>& last = windows[its.back()];
      const size_t tail = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(last.size()), 2 * block));
      std::stable_sort(last.end() - static_cast<std::ptrdiff_t>(tail), last.end(),
                       [&](int64_t a, int64_t b) { return ShardOf(start, a) < ShardOf(start, b); });
    }
    // Blocks of one batch per rank, from the lanes in turn; a lane that runs
    // out hands the rest of its block to the next, so that every block but
    // the last is whole and a rank's batch is one block (a block that
    // straddles two lanes reads a few of the other lane's shards).
    std::vector<size_t> at_window(lane_count, 0), at_member(lane_count, 0);
    std::vector<int64_t> lane_left = lane_samples;
    order_.reserve(static_cast<size_t>(num_samples));
    windows_.reserve(static_cast<size_t>(num_samples));
    auto take = [&](size_t lane) {
      const size_t w = lane_windows[lane][at_window[lane]];
      order_.push_back(windows[w][at_member[lane]]);
      windows_.push_back(static_cast<int32_t>(w));
      --lane_left[lane];
      if (++at_member[lane] == windows[w].size()) ++at_window[lane], at_member[lane] = 0;
    };
    size_t l = 0;
    int64_t in_block = 0;
    for (int64_t left = num_samples; left > 0;) {
      if (lane_left[l] == 0) {  // this lane is done
        l = (l + 1) % lane_count;
        continue;
      }
      take(l);
      --left;
      if (++in_block == block) {
        in_block = 0;
        l = (l + 1) % lane_count;
      } else if (lane_left[l] == 0 && left > 0) {
        // The lane ran out mid-block: the next lane with samples left
        // completes the block, from as few of its shards as it can.
        size_t next = (l + 1) % lane_count;
        while (lane_left[next] == 0) next = (next + 1) % lane_count;
        const std::vector<size_t>& its = lane_windows[next];
        const int64_t short_by = std::min(block - in_block, lane_left[next]);
        Borrow(windows[its[at_window[next]]], at_member[next],
               at_window[next] + 1 < its.size() ? &windows[its.back()] : nullptr, short_by, start);
      }
    }
  } else {
    order_.resize(static_cast<size_t>(num_samples));
    std::iota(order_.begin(), order_.end(), int64_t{0});
    Rng rng = Rng::ForEpoch(seed, epoch);
    if (shuffle) Shuffle(order_, rng);
  }
  if (world_size > 1) {
    const int64_t n = static_cast<int64_t>(order_.size());
    const int64_t per_rank = drop_last ? n / world_size : (n + world_size - 1) / world_size;
    std::vector<int64_t> share;
    std::vector<int32_t> share_windows;
    share.reserve(static_cast<size_t>(per_rank));
    for (int64_t k = 0; k < per_rank && n > 0; ++k) {
      const size_t at = static_cast<size_t>((rank + k * world_size) % n);  // padding wraps to the start
      share.push_back(order_[at]);
      if (!windows_.empty()) share_windows.push_back(windows_[at]);
    }
    order_ = std::move(share);
    windows_ = std::move(share_windows);
  }
}

int64_t EpochPlan::BatchWindow(int64_t b) const {
  const int64_t at = b * batch_size_;
  if (windows_.empty() || b < 0 || at >= static_cast<int64_t>(windows_.size())) return -1;
  return windows_[static_cast<size_t>(at)];
}

int64_t EpochPlan::BatchLane(int64_t b) const {
  const int64_t w = BatchWindow(b);
  return w < 0 ? -1 : window_lanes_[static_cast<size_t>(w)];
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
