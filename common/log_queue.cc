#include "common/log_queue.h"

#include <atomic>

#include "absl/strings/str_cat.h"

namespace stoker {

void LogQueue::send(google::LogSeverity severity, const char* full_filename, const char* base_filename, int line,
                    const struct ::tm* tm_time, const char* message, size_t message_len) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  if (records_.size() >= capacity_) {
    ++dropped_;
    return;
  }
  records_.push_back(LogRecord{static_cast<int>(severity), base_filename != nullptr ? base_filename : "", line,
                               std::string(message, message_len)});
}

bool LogQueue::Take(absl::Duration timeout, std::vector<LogRecord>* out) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return closed_ || !records_.empty() || dropped_ > 0; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (dropped_ > 0) {
    out->push_back(LogRecord{google::GLOG_WARNING, "log_queue.cc", __LINE__,
                             absl::StrCat(dropped_, " log records were dropped (the queue was full)")});
    dropped_ = 0;
  }
  for (LogRecord& r : records_) out->push_back(std::move(r));
  records_.clear();
  return !closed_ || !out->empty();
}

void LogQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

namespace {
std::atomic<LogQueue*> installed{nullptr};
}  // namespace

LogQueue& InstallProcessLogQueue(int min_severity) {
  static LogQueue* queue = [] {
    auto* q = new LogQueue();
    FLAGS_logtostderr = false;
    FLAGS_alsologtostderr = false;
    FLAGS_stderrthreshold = google::GLOG_FATAL;
    for (int s = google::GLOG_INFO; s <= google::GLOG_FATAL; ++s) google::SetLogDestination(s, "");
    google::AddLogSink(q);
    installed.store(q);
    return q;
  }();
  FLAGS_minloglevel = min_severity;
  return *queue;
}

LogQueue* ProcessLogQueue() { return installed.load(); }

void UninstallProcessLogQueue() {
  LogQueue* q = installed.load();
  if (q == nullptr) return;
  google::RemoveLogSink(q);
  FLAGS_logtostderr = true;
  q->Close();
}

}  // namespace stoker
