#include "dataplane/base/capacity_meter.h"

namespace stoker {

CapacityMeter::CapacityMeter(prometheus::Gauge* gauge, absl::Duration half_life)
    : gauge_(gauge), samples_per_second_(half_life) {}

void CapacityMeter::SetWorkers(int workers) {
  absl::MutexLock lock(&mu_);
  workers_ = workers > 0 ? workers : 1;
}

void CapacityMeter::Add(int64_t samples, absl::Duration worker_time, absl::Time now) {
  if (samples <= 0 || worker_time <= absl::ZeroDuration()) return;
  double value;
  {
    absl::MutexLock lock(&mu_);
    samples_per_second_.Add(static_cast<double>(samples), absl::ToDoubleSeconds(worker_time), now);
    value = workers_ * samples_per_second_.Value();
  }
  if (gauge_) gauge_->Set(value);
}

double CapacityMeter::ImagesPerSecond() const {
  absl::MutexLock lock(&mu_);
  return workers_ * samples_per_second_.Value();
}

}  // namespace stoker
