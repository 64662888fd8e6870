// The data server's capacity: images per second its workers can make for the
// pipelines they are running, from the worker time the samples took (whole
// sample tasks: read, decode, augment, laying out, replacements of bad
// samples). capacity = workers / (worker-seconds per sample), over a recent
// window (DecayingRatio, 20 s half-life). Exported as the gauge
// stoker_server_capacity_images_per_second and sent in every batch's
// StageTimes, so that a client (stoker-bench) and the recording rule
// stoker:servers_needed can size the pool. Sessions in a diagnostic cache
// mode are left out (they skip the work), and so are samples a cancellation
// skipped. The figure is per-sample wall time, so it is the rate at the load
// the server has had: measured while few workers run, it counts each worker
// as a whole core, which overstates a server whose --workers exceed its
// physical cores (SMT siblings, a CPU quota); it is right once the workers
// are busy. Thread-safe.
#ifndef STOKER_DATAPLANE_BASE_CAPACITY_METER_H_
#define STOKER_DATAPLANE_BASE_CAPACITY_METER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/decaying_ratio.h"
#include "prometheus/gauge.h"

namespace stoker {

class CapacityMeter {
 public:
  // `gauge` (nullable) is set to the capacity after every Add.
  explicit CapacityMeter(prometheus::Gauge* gauge, absl::Duration half_life = absl::Seconds(20));

  void SetWorkers(int workers);
  // `samples` took `worker_time` of worker time in all.
  void Add(int64_t samples, absl::Duration worker_time, absl::Time now = absl::Now());
  // Images per second; 0 before any sample.
  double ImagesPerSecond() const;

 private:
  prometheus::Gauge* const gauge_;
  mutable absl::Mutex mu_;
  DecayingRatio samples_per_second_ ABSL_GUARDED_BY(mu_);
  int workers_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_BASE_CAPACITY_METER_H_
