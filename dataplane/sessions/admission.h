// Admission of sessions on a server: at most `max_streams` sessions (each
// BatchStream opens one) and `max_sessions` distinct jobs (SessionConfig.job)
// at once; 0 is no limit. Past a limit a new session is refused with
// RESOURCE_EXHAUSTED naming the limit and a retry hint (kFullRetryAfter), so
// that the client counts the server as full rather than failed and uses the
// others. Thread-safe.
#ifndef STOKER_DATAPLANE_SESSIONS_ADMISSION_H_
#define STOKER_DATAPLANE_SESSIONS_ADMISSION_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stoker {

// How long a refused client waits before asking a full server again.
inline constexpr absl::Duration kFullRetryAfter = absl::Seconds(2);

struct AdmissionLimits {
  int max_sessions = 0;  // distinct jobs at once
  int max_streams = 0;   // sessions (streams) at once
};

class Admission {
 public:
  explicit Admission(AdmissionLimits limits) : limits_(limits) {}

  // A place taken; given back when destroyed.
  class Ticket {
   public:
    ~Ticket() { admission_->Release(job_); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    friend class Admission;
    Ticket(Admission* admission, std::string job) : admission_(admission), job_(std::move(job)) {}
    Admission* const admission_;
    const std::string job_;
  };

  // A ticket for a session of `job`, or RESOURCE_EXHAUSTED.
  absl::StatusOr<std::unique_ptr<Ticket>> Admit(const std::string& job);

  int streams() const;
  int jobs() const;

 private:
  void Release(const std::string& job);

  const AdmissionLimits limits_;
  mutable absl::Mutex mu_;
  std::map<std::string, int> jobs_ ABSL_GUARDED_BY(mu_);  // job -> sessions
  int streams_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SESSIONS_ADMISSION_H_
