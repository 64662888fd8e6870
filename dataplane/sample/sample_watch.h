// When a sample must stop: its session's stream ended (cancelled, broken,
// closed), or it used more CPU time than --max-sample-seconds. A worker
// thread installs one SampleWatch for the sample it runs; the pipeline checks
// it between ops and the long kernels (gaussian_blur, video frames, the wait
// on a Python worker) poll it, so a dead client's work stops within a strip
// of rows, not hours later (issue 49).
//
// What a stop means for the batch: a timer depends on the server's load, not
// on the data, so a sample past a timer (CPU time here; a Python worker's
// timeout or crash; media decoding past its wall-clock bound) is never
// replaced by another sample: TimerError marks the status, and the session
// fails the whole batch as retryable (DEADLINE_EXCEEDED) for another server
// to make. Thread-compatible: one per worker thread, on its stack.
#ifndef STOKER_DATAPLANE_SAMPLE_SAMPLE_WATCH_H_
#define STOKER_DATAPLANE_SAMPLE_SAMPLE_WATCH_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dataplane/decode/image_decoder.h"  // TimerError, IsTimerError

namespace stoker {

class SampleWatch {
 public:
  // Watches this thread's sample until destroyed: `cancelled` (may be null)
  // is the session's flag, `abandoned` (may be null) the batch's (it failed
  // already: the sample's work is wasted); `cpu_limit` (zero or infinite:
  // none) bounds the thread's CPU time from now, in this thread (work that
  // OpenCV hands to its own threads is not counted). Watches nest (the
  // innermost is seen).
  SampleWatch(const std::atomic<bool>* cancelled, absl::Duration cpu_limit,
              const std::atomic<bool>* abandoned = nullptr);
  ~SampleWatch();
  SampleWatch(const SampleWatch&) = delete;
  SampleWatch& operator=(const SampleWatch&) = delete;

  // OK; CANCELLED when the session was cancelled or the batch abandoned; a TimerError naming
  // --max-sample-seconds when the CPU time is spent. OK without a watch.
  static absl::Status Check();
  // Check() is not OK (cheap enough for every strip of rows of a kernel).
  static bool ShouldStop();

 private:
  const std::atomic<bool>* cancelled_;
  const std::atomic<bool>* abandoned_;
  int64_t cpu_deadline_ns_;  // thread CPU clock; INT64_MAX: none
  absl::Duration cpu_limit_;
  SampleWatch* outer_;
};

// The thread's CPU time so far, in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
int64_t ThreadCpuNanos();

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SAMPLE_SAMPLE_WATCH_H_
