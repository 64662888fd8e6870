// Time for timeouts, injected so that tests (and the client's scheduling
// simulation) control it. SteadyClock is monotonic: NTP steps and VM
// migrations do not move it, unlike absl::Now(). Its absl::Time values are
// only for differences (their epoch is the machine's boot, not 1970).
// Thread-safe.
#ifndef STOKER_COMMON_CLOCK_H_
#define STOKER_COMMON_CLOCK_H_

#include <chrono>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stoker {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
};

class SteadyClock final : public Clock {
 public:
  absl::Time Now() override {
    return absl::UnixEpoch() + absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  }
  // One shared instance.
  static Clock* Get() {
    static auto* clock = new SteadyClock();
    return clock;
  }
};

// A clock that moves only when told. For tests.
class FakeClock final : public Clock {
 public:
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch() + absl::Hours(1);
};

}  // namespace stoker

#endif  // STOKER_COMMON_CLOCK_H_
