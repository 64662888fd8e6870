// The bottleneck verdict: what limits a training job's input right now. Fed
// with what the client sees (time the training loop waited for a batch, time
// spent staging batches to the device, and per batch the server's own times
// from the header against the receive latency), it names one stage:
//
//   input-bound = (wait + h2d) / wall, where wait includes the time spent
//     opening the dataset while servers copied it from a remote store (the
//     storage wait); below 5% -> "none" (input keeps up; TensorBoard's
//     input-pipeline analyzer calls >= 5% moderately and >= 20% highly
//     input-bound);
//   h2d >= wait -> "h2d" (the copy to the device is the longer stall; on
//     the CPU fallback, with no device, "host_convert": the uint8-to-float
//     conversion on the training host, which a faster network or more
//     servers would not help);
//   else storage wait >= half of the starved time (wait included) ->
//     "storage" (the job waits for the dataset's copy from its store: a cold
//     cache);
//   else, per received batch, transfer = receive latency - server time: when
//     the mean transfer exceeds the mean server time -> "network" (batches
//     wait for the stream and the wire, not for workers);
//   else read time vs decode + augment + python time summed over the batch's
//     samples: read larger -> "storage"; otherwise "python_transform" when
//     the session's Python stages (python(...) ops) take more than half of
//     that worker time (more --python-workers, or the op in C++, helps),
//     else "server_cpu".
//
// deploy/prometheus/recording_rules.yml computes the same rule fleet-wide
// from the counters this class also exports. Thread-safe.
#ifndef STOKER_CLIENT_BOTTLENECK_H_
#define STOKER_CLIENT_BOTTLENECK_H_

#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/client_metrics.h"
#include "client/demand_meter.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// Thresholds of the rule. Load-bearing: the README and the recording rules
// use the same numbers.
inline constexpr double kInputBoundRatio = 0.05;

struct Verdict {
  std::string stage = "none";   // none, server_cpu, python_transform, storage, network, h2d or host_convert
  std::string staging = "h2d";  // what the staging time is: h2d, or host_convert on the CPU fallback
  double wall_seconds = 0;
  double starved_ratio = 0;       // waiting in Next() or for the store's copy / wall
  double storage_wait_ratio = 0;  // the part of starved_ratio spent waiting for the store's copy
  double h2d_ratio = 0;           // staging to the device / wall
  double transfer_seconds = 0;    // per batch: receive latency - server time
  double server_seconds = 0;      // per batch: request arrival to ready, on the server
  double read_seconds = 0;        // per batch: summed over samples
  double compute_seconds = 0;     // per batch: decode + augment + python, summed over samples
  double python_seconds = 0;      // per batch: the part of compute in Python stages
  int64_t batches = 0;
  std::string Explain() const;  // the figures that led to it
};

class BottleneckMeter {
 public:
  // `metrics` (nullable) receives the exported signals and the verdict gauge.
  explicit BottleneckMeter(ClientMetrics* metrics, absl::Duration window = absl::Seconds(10));

  // The stager's path (DeviceStager::path()): "cpu" makes staging
  // "host_convert" (the CPU fallback converts on the host); anything else
  // "h2d" (the default).
  void SetDevicePath(const std::string& path);
  // The verdict stages, for gauges and dashboards.
  static const std::vector<std::string>& Stages();

  void OnWait(absl::Duration waited);
  // Waited to open the dataset while it was copied from its remote store.
  void OnStorageWait(absl::Duration waited);
  void OnH2d(absl::Duration staged);
  void OnBatch(const v1::StageTimes& times, absl::Duration receive_latency);

  // The verdict over the last `window` (or since the start); updates the
  // stoker_client_bottleneck gauges.
  Verdict Evaluate();
  // The verdict over everything since construction.
  Verdict EvaluateAll() const;

  // The job's demand and the servers it needs (demand_meter.h).
  DemandMeter& demand() { return demand_; }
  const DemandMeter& demand() const { return demand_; }

 private:
  struct Event {
    absl::Time at;
    double wait = 0, h2d = 0, transfer = 0, server = 0, read = 0, compute = 0, python = 0, storage_wait = 0;
    bool batch = false;
  };
  struct Totals {
    double wait = 0, h2d = 0, transfer = 0, server = 0, read = 0, compute = 0, python = 0, storage_wait = 0;
    int64_t batches = 0;
    void Add(const Event& e);
  };
  static Verdict Judge(const Totals& t, double wall_seconds, const std::string& staging);
  void Record(const Event& e);

  ClientMetrics* const metrics_;
  const absl::Duration window_;
  const absl::Time start_;
  mutable absl::Mutex mu_;
  std::deque<Event> recent_ ABSL_GUARDED_BY(mu_);  // within the window
  Totals all_ ABSL_GUARDED_BY(mu_);                // since the start
  std::string staging_ ABSL_GUARDED_BY(mu_) = "h2d";
  DemandMeter demand_;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_BOTTLENECK_H_
