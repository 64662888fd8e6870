#include "dataplane/sessions/admission.h"

#include "absl/strings/str_cat.h"

namespace stoker {

absl::StatusOr<std::unique_ptr<Admission::Ticket>> Admission::Admit(const std::string& job) {
  absl::MutexLock lock(&mu_);
  const std::string retry =
      absl::StrCat("; retry in ", absl::FormatDuration(kFullRetryAfter), " or use another server");
  if (limits_.max_streams > 0 && streams_ >= limits_.max_streams) {
    return absl::ResourceExhaustedError(
        absl::StrCat("server full: ", streams_, " streams open (--max-streams ", limits_.max_streams, ")", retry));
  }
  if (limits_.max_sessions > 0 && !jobs_.count(job) && static_cast<int>(jobs_.size()) >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(absl::StrCat("server full: ", jobs_.size(), " jobs served (--max-sessions ",
                                                     limits_.max_sessions, "), not job '", job, "'", retry));
  }
  ++streams_;
  ++jobs_[job];
  return std::unique_ptr<Ticket>(new Ticket(this, job));
}

void Admission::Release(const std::string& job) {
  absl::MutexLock lock(&mu_);
  --streams_;
  auto it = jobs_.find(job);
  if (it != jobs_.end() && --it->second <= 0) jobs_.erase(it);
}

int Admission::streams() const {
  absl::MutexLock lock(&mu_);
  return streams_;
}

int Admission::jobs() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(jobs_.size());
}

}  // namespace stoker
