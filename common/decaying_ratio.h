// A ratio of two sums over a recent, exponentially weighted window: both sums
// decay by half every `half_life`, so the ratio follows a change (a new
// pipeline, a slower training step) within a few half-lives and keeps its
// last value while nothing is added. The data server's capacity (samples per
// worker-second) and the client's demand (images per second of training
// step) are such ratios. Thread-compatible: callers lock.
#ifndef STOKER_COMMON_DECAYING_RATIO_H_
#define STOKER_COMMON_DECAYING_RATIO_H_

#include "absl/time/time.h"

namespace stoker {

class DecayingRatio {
 public:
  explicit DecayingRatio(absl::Duration half_life) : half_life_(half_life) {}

  // Adds to both sums at `now` (times must not go backwards; an earlier time
  // counts as `now` = the last one).
  void Add(double numerator, double denominator, absl::Time now);
  // numerator / denominator over the window; 0 before anything with a
  // positive denominator was added.
  double Value() const { return denominator_ > 0 ? numerator_ / denominator_ : 0; }

 private:
  const absl::Duration half_life_;
  double numerator_ = 0, denominator_ = 0;
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace stoker

#endif  // STOKER_COMMON_DECAYING_RATIO_H_
