// stoker-metrics-reference: prints the Prometheus metric families the data
// server and the client register (name, type, labels, help) as the Markdown
// tables of docs/reference/metrics.md, from the registries themselves, so
// that the page cannot drift from the code (docs/gen_reference.py).
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "client/client_metrics.h"
#include "dataplane/base/server_metrics.h"
#include "prometheus/registry.h"
#include "server/storage_metrics.h"

namespace {

// A label value that stands for "one per value seen at run time".
constexpr char kAny[] = "\x01";

const char* TypeName(prometheus::MetricType type) {
  switch (type) {
    case prometheus::MetricType::Counter: return "counter";
    case prometheus::MetricType::Gauge: return "gauge";
    case prometheus::MetricType::Histogram: return "histogram";
    case prometheus::MetricType::Summary: return "summary";
    default: return "untyped";
  }
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

void Print(const std::string& heading, const prometheus::Collectable& registry) {
  std::cout << "## " << heading << "\n\n| Metric | Type | Labels | Meaning |\n|---|---|---|---|\n";
  std::map<std::string, std::string> rows;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    std::map<std::string, std::set<std::string>> labels;
    for (const prometheus::ClientMetric& metric : family.metric) {
      for (const prometheus::ClientMetric::Label& label : metric.label) labels[label.name].insert(label.value);
    }
    std::string text;
    for (const auto& [name, values] : labels) {
      text += (text.empty() ? "" : "; ") + std::string("`") + name + "`";
      if (values.count(kAny)) continue;  // one series per value met
      std::string list;
      for (const std::string& v : values) list += (list.empty() ? "" : ", ") + v;
      text += " (" + list + ")";
    }
    rows[family.name] = "| `" + family.name + "` | " + TypeName(family.type) + " | " + (text.empty() ? "-" : text) +
                        " | " + Escape(family.help) + " |\n";
  }
  for (const auto& [name, row] : rows) std::cout << row;
  std::cout << "\n";
}

}  // namespace

int main() {
  prometheus::Registry server;
  stoker::ServerMetrics server_metrics(server);
  server_metrics.JobWorkerSeconds(kAny);
  server_metrics.JobSamples(kAny);
  prometheus::Registry client;
  stoker::ClientMetrics client_metrics(client);
  client_metrics.Bottleneck(kAny);
  client_metrics.RingSlots("in_use");
  client_metrics.RingSlots("free");
  client_metrics.DevicePath("cuda");
  client_metrics.DevicePath("cpu");
  client_metrics.ServerBatches(kAny);
  client_metrics.ServerFailures(kAny);
  client_metrics.SessionRefusals(kAny);
  client_metrics.ServerFull(kAny);
  Print("Data server (`stoker-server`, `--metrics-port`)", server);
  stoker::StorageReading reading;
  reading.store = kAny;
  reading.counters.retries_by_reason[kAny] = 1;
  Print(
      "Data server's store (`stoker-server --data-root s3://...` or `https://...`; `store`: s3, http, https or "
      "catalog)",
      stoker::StorageMetrics([&] { return reading; }));
  Print("Client (`stoker-bench`, the Python loader, `metrics_port`)", client);
  return 0;
}
