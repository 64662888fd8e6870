#include "dataplane/sample/sample_watch.h"

#include <time.h>

#include <limits>

#include "absl/strings/str_cat.h"

namespace stoker {
namespace {

thread_local SampleWatch* current = nullptr;

}  // namespace

int64_t ThreadCpuNanos() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

SampleWatch::SampleWatch(const std::atomic<bool>* cancelled, absl::Duration cpu_limit,
                         const std::atomic<bool>* abandoned)
    : cancelled_(cancelled), abandoned_(abandoned), cpu_limit_(cpu_limit), outer_(current) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  cpu_deadline_ns_ = kNone;
  if (cpu_limit > absl::ZeroDuration() && cpu_limit != absl::InfiniteDuration()) {
    const int64_t now = ThreadCpuNanos(), limit = absl::ToInt64Nanoseconds(cpu_limit);  // saturates
    cpu_deadline_ns_ = limit >= kNone - now ? kNone : now + limit;
  }
  current = this;
}

SampleWatch::~SampleWatch() { current = outer_; }

absl::Status SampleWatch::Check() {
  const SampleWatch* w = current;
  if (w == nullptr) return absl::OkStatus();
  if (w->cancelled_ != nullptr && w->cancelled_->load(std::memory_order_relaxed)) {
    return absl::CancelledError("the session's stream ended; the sample was stopped");
  }
  if (w->abandoned_ != nullptr && w->abandoned_->load(std::memory_order_relaxed)) {
    return absl::CancelledError("another sample failed the batch; the sample was stopped");
  }
  if (w->cpu_deadline_ns_ != std::numeric_limits<int64_t>::max() && ThreadCpuNanos() > w->cpu_deadline_ns_) {
    return TimerError(
        absl::StrCat("took more than ", absl::FormatDuration(w->cpu_limit_), " of CPU time (--max-sample-seconds)"));
  }
  return absl::OkStatus();
}

bool SampleWatch::ShouldStop() { return current != nullptr && !Check().ok(); }

}  // namespace stoker
