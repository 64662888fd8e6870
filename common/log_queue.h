// glog's messages of a process queued for another logging system to take
// (the Python package hands them to Python's `logging`, logger "stoker",
// from a thread of its own): a LogSink that never blocks the thread that
// logs, never calls into Python, and drops (and counts) what a full queue
// cannot hold. Thread-safe.
#ifndef STOKER_COMMON_LOG_QUEUE_H_
#define STOKER_COMMON_LOG_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace stoker {

struct LogRecord {
  int severity = 0;  // glog's: 0 INFO .. 3 FATAL
  std::string file;  // base name
  int line = 0;
  std::string message;
};

class LogQueue : public google::LogSink {
 public:
  explicit LogQueue(size_t capacity = 10000) : capacity_(capacity) {}

  // glog's LogSink: queues the record (or counts it dropped when full).
  void send(google::LogSeverity severity, const char* full_filename, const char* base_filename, int line,
            const struct ::tm* tm_time, const char* message, size_t message_len) override;

  // Waits up to `timeout` for records and moves them to `out`. False once
  // Close() was called and nothing is left. A drop since the last call
  // gives a WARNING record saying how many were lost.
  bool Take(absl::Duration timeout, std::vector<LogRecord>* out);

  // Wakes Take and ends it; later records are dropped (uncounted).
  void Close();

 private:
  const size_t capacity_;
  absl::Mutex mu_;
  std::deque<LogRecord> records_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// The process's one queue, installed as a glog sink on the first call, with
// glog's own stderr output and log files turned off (what passes
// `min_severity` reaches the queue alone). Later calls set the level.
LogQueue& InstallProcessLogQueue(int min_severity);

// The installed queue (nullptr before InstallProcessLogQueue); the level is
// left as it is.
LogQueue* ProcessLogQueue();

// At exit: closes the installed queue (Take ends) and hands glog's messages
// back to stderr, so that what is logged later is still seen.
void UninstallProcessLogQueue();

}  // namespace stoker

#endif  // STOKER_COMMON_LOG_QUEUE_H_
