#include "client/bottleneck.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace stoker {

std::string Verdict::Explain() const {
  return absl::StrFormat(
      "starved %.1f%%%s, %s %.1f%% of %.1f s; per batch (%d): "
      "transfer %.1f ms vs server %.1f ms, read %.1f ms vs decode+augment+python %.1f ms of worker time "
      "(python %.1f ms)",
      100 * starved_ratio,
      storage_wait_ratio > 0 ? absl::StrFormat(" (%.1f%% waiting for the store's copy)", 100 * storage_wait_ratio) : "",
      staging, 100 * h2d_ratio, wall_seconds, batches, 1e3 * transfer_seconds, 1e3 * server_seconds, 1e3 * read_seconds,
      1e3 * compute_seconds, 1e3 * python_seconds);
}

BottleneckMeter::BottleneckMeter(ClientMetrics* metrics, absl::Duration window)
    : metrics_(metrics), window_(window), start_(absl::Now()), demand_(metrics) {}

void BottleneckMeter::Totals::Add(const Event& e) {
  wait += e.wait;
  h2d += e.h2d;
  storage_wait += e.storage_wait;
  if (!e.batch) return;
  transfer += e.transfer;
  server += e.server;
  read += e.read;
  compute += e.compute;
  python += e.python;
  ++batches;
}

void BottleneckMeter::Record(const Event& e) {
  absl::MutexLock lock(&mu_);
  recent_.push_back(e);
  all_.Add(e);
}

void BottleneckMeter::OnWait(absl::Duration waited) {
  Event e{absl::Now()};
  e.wait = absl::ToDoubleSeconds(waited);
  Record(e);
}

void BottleneckMeter::OnStorageWait(absl::Duration waited) {
  Event e{absl::Now()};
  e.storage_wait = absl::ToDoubleSeconds(waited);
  if (metrics_) metrics_->storage_wait_seconds->Increment(e.storage_wait);
  Record(e);
}

void BottleneckMeter::OnH2d(absl::Duration staged) {
  demand_.OnStaged(staged);  // input time, not the training step
  Event e{absl::Now()};
  e.h2d = absl::ToDoubleSeconds(staged);
  Record(e);
}

void BottleneckMeter::OnBatch(const v1::StageTimes& t, absl::Duration receive_latency) {
  Event e{absl::Now()};
  e.batch = true;
  e.server = t.server_seconds();
  e.transfer = std::max(0.0, absl::ToDoubleSeconds(receive_latency) - t.server_seconds());
  e.read = t.read_seconds();
  e.python = t.python_seconds();
  e.compute = t.decode_seconds() + t.augment_seconds() + e.python;
  if (metrics_) {
    metrics_->batch_server_seconds->Increment(e.server);
    metrics_->batch_transfer_seconds->Increment(e.transfer);
    metrics_->batch_read_seconds->Increment(e.read);
    metrics_->batch_compute_seconds->Increment(e.compute);
    metrics_->batch_python_seconds->Increment(e.python);
  }
  Record(e);
}

void BottleneckMeter::SetDevicePath(const std::string& path) {
  absl::MutexLock lock(&mu_);
  staging_ = path == "cpu" ? "host_convert" : "h2d";
}

const std::vector<std::string>& BottleneckMeter::Stages() {
  static const auto* stages = new std::vector<std::string>{"none",    "server_cpu", "python_transform", "storage",
                                                           "network", "h2d",        "host_convert"};
  return *stages;
}

Verdict BottleneckMeter::Judge(const Totals& t, double wall_seconds, const std::string& staging) {
  Verdict v;
  v.staging = staging;
  v.wall_seconds = std::max(1e-9, wall_seconds);
  v.starved_ratio = std::min(1.0, (t.wait + t.storage_wait) / v.wall_seconds);
  v.storage_wait_ratio = std::min(v.starved_ratio, t.storage_wait / v.wall_seconds);
  v.h2d_ratio = std::min(1.0, t.h2d / v.wall_seconds);
  v.batches = t.batches;
  if (t.batches > 0) {
    const double n = static_cast<double>(t.batches);
    v.transfer_seconds = t.transfer / n;
    v.server_seconds = t.server / n;
    v.read_seconds = t.read / n;
    v.compute_seconds = t.compute / n;
    v.python_seconds = t.python / n;
  }
  if (v.starved_ratio + v.h2d_ratio < kInputBoundRatio) {
    v.stage = "none";
  } else if (v.h2d_ratio >= v.starved_ratio) {
    v.stage = staging;
  } else if (t.storage_wait > 0 && t.storage_wait >= t.wait) {  // at least half of the starved time
    v.stage = "storage";
  } else if (v.transfer_seconds > v.server_seconds) {
    v.stage = "network";
  } else if (v.read_seconds > v.compute_seconds) {
    v.stage = "storage";
  } else if (2 * v.python_seconds > v.compute_seconds) {
    v.stage = "python_transform";
  } else {
    v.stage = "server_cpu";
  }
  return v;
}

Verdict BottleneckMeter::Evaluate() {
  Verdict v;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    while (!recent_.empty() && now - recent_.front().at > window_) recent_.pop_front();
    Totals t;
    for (const Event& e : recent_) t.Add(e);
    v = Judge(t, absl::ToDoubleSeconds(now - std::max(start_, now - window_)), staging_);
  }
  if (metrics_) {
    for (const std::string& stage : Stages()) {
      metrics_->Bottleneck(stage).Set(v.stage == stage ? 1 : 0);
    }
    metrics_->starved_ratio->Set(v.starved_ratio);
  }
  return v;
}

Verdict BottleneckMeter::EvaluateAll() const {
  absl::MutexLock lock(&mu_);
  return Judge(all_, absl::ToDoubleSeconds(absl::Now() - start_), staging_);
}

}  // namespace stoker
