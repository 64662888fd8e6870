#include "common/decaying_ratio.h"

#include <cmath>

namespace stoker {

void DecayingRatio::Add(double numerator, double denominator, absl::Time now) {
  if (last_ != absl::InfinitePast() && now > last_ && half_life_ > absl::ZeroDuration()) {
    const double keep = std::exp2(-absl::FDivDuration(now - last_, half_life_));
    numerator_ *= keep;
    denominator_ *= keep;
  }
  if (now > last_) last_ = now;
  numerator_ += numerator;
  denominator_ += denominator;
}

}  // namespace stoker
