#include "client/demand_meter.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace stoker {

int ServersNeeded(double demand, double capacity, double headroom) {
  if (demand <= 0 || capacity <= 0) return 0;
  return static_cast<int>(std::ceil(headroom * demand / capacity));
}

std::string DemandReport::Explain() const {
  if (servers_needed == 0) return "not known yet (needs a measured training step and a server's capacity)";
  return absl::StrFormat("demand %.0f images/s over %.0f images/s per server (mean of %d) with %.0f%% headroom",
                         demand_images_per_second, mean_server_capacity, servers_reporting,
                         100 * (kServersHeadroom - 1));
}

DemandMeter::DemandMeter(ClientMetrics* metrics, absl::Duration half_life) : metrics_(metrics), demand_(half_life) {}

void DemandMeter::OnNext(absl::Time called, absl::Time returned, int64_t images) {
  constexpr double kPauseFactor = 10;  // a step this many times the recent one is a pause
  double demand = 0;
  {
    absl::MutexLock lock(&mu_);
    const bool had_batch = last_returned_ != absl::InfinitePast();
    const double step = absl::ToDoubleSeconds(called - last_returned_ - staged_);
    const double consumed = static_cast<double>(last_images_);
    last_returned_ = returned;
    last_images_ = images;
    staged_ = absl::ZeroDuration();
    if (!had_batch || step <= 0 || consumed <= 0) return;
    const double recent = demand_.Value();                                            // images per second of step
    if (recent > 0 && step > 1.0 && step > kPauseFactor * consumed / recent) return;  // a pause, not a step
    demand_.Add(consumed, step, returned);
    demand = demand_.Value();
    if (metrics_) {
      metrics_->consumed_images->Increment(consumed);
      metrics_->step_seconds->Increment(step);
    }
  }
  if (metrics_) metrics_->demand_images_per_second->Set(demand);
}

void DemandMeter::OnStaged(absl::Duration staged) {
  absl::MutexLock lock(&mu_);
  staged_ += staged;
}

void DemandMeter::Pause() {
  absl::MutexLock lock(&mu_);
  last_returned_ = absl::InfinitePast();
  last_images_ = 0;
  staged_ = absl::ZeroDuration();
}

void DemandMeter::OnCapacity(const std::string& server, double images_per_second) {
  if (images_per_second <= 0) return;
  absl::MutexLock lock(&mu_);
  capacity_[server] = images_per_second;
}

void DemandMeter::ForgetServer(const std::string& server) {
  absl::MutexLock lock(&mu_);
  capacity_.erase(server);
}

DemandReport DemandMeter::Report() const {
  absl::MutexLock lock(&mu_);
  DemandReport r;
  r.demand_images_per_second = demand_.Value();
  double sum = 0;
  for (const auto& [server, c] : capacity_) sum += c;
  r.servers_reporting = static_cast<int>(capacity_.size());
  if (r.servers_reporting > 0) r.mean_server_capacity = sum / r.servers_reporting;
  r.servers_needed = ServersNeeded(r.demand_images_per_second, r.mean_server_capacity);
  return r;
}

}  // namespace stoker
