// How many data servers a training job needs. The job's demand is the
// images per second its training loop consumes when it does not wait: a
// batch's images over the loop's step that consumed it (from Next()
// returning the batch to the next call, less the time staging it to the
// device, which is input time). The pause between epochs (evaluation,
// checkpoints) is not a step, nor is a gap more than ten times the recent
// step and over a second (a pause mid-epoch). Each server's capacity comes
// with its batches (StageTimes.capacity_images_per_second, see
// dataplane/base/capacity_meter.h). servers needed = ceil(headroom x demand / mean
// server capacity), the same rule as the recording rule
// stoker:servers_needed (deploy/prometheus/recording_rules.yml).
// Thread-safe.
#ifndef STOKER_CLIENT_DEMAND_METER_H_
#define STOKER_CLIENT_DEMAND_METER_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/client_metrics.h"
#include "common/decaying_ratio.h"

namespace stoker {

// Load-bearing: the recording rule uses the same headroom.
inline constexpr double kServersHeadroom = 1.1;

// ceil(headroom x demand / capacity), in double arithmetic as PromQL does
// it; 0 when either is unknown (<= 0).
int ServersNeeded(double demand_images_per_second, double server_capacity_images_per_second,
                  double headroom = kServersHeadroom);

struct DemandReport {
  double demand_images_per_second = 0;  // 0: no step measured yet
  double mean_server_capacity = 0;      // images/s, over the servers that reported one
  int servers_reporting = 0;
  int servers_needed = 0;  // 0 when demand or capacity is unknown
  std::string Explain() const;
};

class DemandMeter {
 public:
  // `metrics` (nullable) receives stoker_client_consumed_images_total,
  // stoker_client_step_seconds_total and the demand gauge.
  explicit DemandMeter(ClientMetrics* metrics, absl::Duration half_life = absl::Seconds(20));

  // Next() was called at `called` and returned `images` images at `returned`.
  void OnNext(absl::Time called, absl::Time returned, int64_t images);
  // The loop spent `staged` staging the last batch (copy to the device, or
  // the host conversion): not part of its step.
  void OnStaged(absl::Duration staged);
  // The epoch ended: the time until the next batch is not a step.
  void Pause();
  // A batch from `server` said its capacity (<= 0: not known; ignored).
  void OnCapacity(const std::string& server, double images_per_second);
  // Forgets a server that left the pool.
  void ForgetServer(const std::string& server);

  DemandReport Report() const;

 private:
  ClientMetrics* const metrics_;
  mutable absl::Mutex mu_;
  DecayingRatio demand_ ABSL_GUARDED_BY(mu_);
  absl::Time last_returned_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // past: no batch out
  int64_t last_images_ ABSL_GUARDED_BY(mu_) = 0;                          // the batch the step consumes
  absl::Duration staged_ ABSL_GUARDED_BY(mu_);                            // staging since it was returned
  std::map<std::string, double> capacity_ ABSL_GUARDED_BY(mu_);           // latest per server
};

}  // namespace stoker

#endif  // STOKER_CLIENT_DEMAND_METER_H_
