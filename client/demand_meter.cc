#include "client/demand_meter.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace stoker {

int ServersNeeded(double demand, double capacity, double headroom) {
  if (demand <= 0 || capacity <= 0) return 0;
  return static_cast<int>(std::ceil(headroom * demand / capacity - 1e-9));
}

std::string DemandReport::Explain() const {
  if (servers_needed == 0) return "not known yet (needs a measured training step and a server's capacity)";
  return absl::StrFormat("demand %.0f images/s over %.0f images/s per server (mean of %d) with %.0f%% headroom",
                         demand_images_per_second, mean_server_capacity, servers_reporting,
                         100 * (kServersHeadroom - 1));
}

DemandMeter::DemandMeter(ClientMetrics* metrics, absl::Duration half_life)
    : metrics_(metrics), demand_(half_life) {}

void DemandMeter::OnNext(absl::Time called, absl::Time returned, int64_t images) {
  double demand = 0;
  {
    absl::MutexLock lock(&mu_);
    const bool first = last_returned_ == absl::InfinitePast();
    const absl::Duration step = first ? absl::ZeroDuration() : called - last_returned_;
    last_returned_ = returned;
    if (first || step <= absl::ZeroDuration()) return;  // the first call has no step before it
    demand_.Add(static_cast<double>(images), absl::ToDoubleSeconds(step), returned);
    demand = demand_.Value();
    if (metrics_) {
      metrics_->consumed_images->Increment(static_cast<double>(images));
      metrics_->step_seconds->Increment(absl::ToDoubleSeconds(step));
    }
  }
  if (metrics_) metrics_->demand_images_per_second->Set(demand);
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
