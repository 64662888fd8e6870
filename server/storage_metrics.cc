#include "server/storage_metrics.h"

#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "storage/catalog_storage.h"

namespace stoker {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const std::string& name, const std::string& help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

ClientMetric Value(MetricType type, double value, std::vector<ClientMetric::Label> labels) {
  ClientMetric m;
  m.label = std::move(labels);
  if (type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return m;
}

}  // namespace

std::string StoreKind(const std::string& root) {
  if (absl::StartsWith(root, kCatalogScheme)) return "catalog";
  const size_t colon = root.find("://");
  return colon == std::string::npos ? "file" : root.substr(0, colon);
}

std::shared_ptr<StorageMetrics> StorageMetrics::ForMirror(StoreMirror* mirror) {
  return std::make_shared<StorageMetrics>([mirror] {
    StorageReading r;
    r.store = StoreKind(mirror->store().root());
    r.counters = mirror->store().counters();
    r.cache = mirror->stats();
    r.cache_capacity_bytes = mirror->capacity_bytes();
    return r;
  });
}

std::vector<MetricFamily> StorageMetrics::Collect() const {
  const StorageReading r = read_();
  const ClientMetric::Label store{"store", r.store};
  std::vector<MetricFamily> out;
  auto one = [&](const std::string& name, const std::string& help, MetricType type, double value,
                 std::vector<ClientMetric::Label> labels) {
    out.push_back(Family(name, help, type));
    out.back().metric.push_back(Value(type, value, std::move(labels)));
  };
  one("stoker_server_storage_requests_total", "Requests sent to the data root's store (retries included)",
      MetricType::Counter, r.counters.requests, {store});
  one("stoker_server_storage_received_bytes_total", "Body bytes received from the data root's store",
      MetricType::Counter, r.counters.bytes, {store});
  out.push_back(Family("stoker_server_storage_retries_total",
                       "Storage requests retried, by reason: an HTTP status (503, 429, 500...), reset, timeout, "
                       "short_body, clock_skew",
                       MetricType::Counter));
  for (const auto& [reason, n] : r.counters.retries_by_reason) {
    out.back().metric.push_back(Value(MetricType::Counter, n, {{"reason", reason}, store}));
  }
  out.push_back(Family("stoker_server_storage_request_seconds",
                       "Time from sending a storage request to its whole answer, seconds", MetricType::Histogram));
  ClientMetric h;
  h.label = {store};
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= std::size(kStorageLatencyBounds); ++i) {
    cumulative += i < r.counters.latency_counts.size() ? r.counters.latency_counts[i] : 0;
    h.histogram.bucket.push_back({cumulative, i < std::size(kStorageLatencyBounds)
                                                  ? kStorageLatencyBounds[i]
                                                  : std::numeric_limits<double>::infinity()});
  }
  h.histogram.sample_count = cumulative;
  h.histogram.sample_sum = r.counters.latency_seconds;
  out.back().metric.push_back(std::move(h));
  out.push_back(Family("stoker_server_storage_cache_objects_total",
                       "Objects a dataset open needed: hit (whole and unchanged in --cache-dir) or fetched",
                       MetricType::Counter));
  out.back().metric.push_back(Value(MetricType::Counter, r.cache.objects_reused, {{"result", "hit"}, store}));
  out.back().metric.push_back(Value(MetricType::Counter, r.cache.objects_fetched, {{"result", "fetched"}, store}));
  out.push_back(Family("stoker_server_storage_cache_objects_bytes_total",
                       "Bytes of the objects a dataset open needed: hit or fetched", MetricType::Counter));
  out.back().metric.push_back(Value(MetricType::Counter, r.cache.bytes_reused, {{"result", "hit"}, store}));
  out.back().metric.push_back(Value(MetricType::Counter, r.cache.bytes_fetched, {{"result", "fetched"}, store}));
  out.push_back(Family("stoker_server_storage_streamed_shards_total",
                       "Reads of shards left in the store (streamed: a dataset larger than --cache-bytes, or "
                       "--stream-shards): hit (held in --cache-dir, fetched ahead included) or fetched (copied from "
                       "the store first); read_ahead counts the shards fetched ahead of their reads (not reads)",
                       MetricType::Counter));
  out.back().metric.push_back(Value(MetricType::Counter, r.cache.streamed_hits, {{"result", "hit"}, store}));
  out.back().metric.push_back(Value(MetricType::Counter, r.cache.streamed_fetches, {{"result", "fetched"}, store}));
  out.back().metric.push_back(
      Value(MetricType::Counter, r.cache.streamed_read_ahead, {{"result", "read_ahead"}, store}));
  one("stoker_server_storage_streamed_bytes", "Bytes of streamed shards held in --cache-dir now", MetricType::Gauge,
      r.cache.streamed_bytes, {store});
  out.push_back(Family("stoker_server_storage_dataset_bytes",
                       "A dataset's bytes in the store (those copied whole and those streamed), per dataset this "
                       "server has opened",
                       MetricType::Gauge));
  for (const auto& [name, n] : r.cache.names) {
    out.back().metric.push_back(Value(MetricType::Gauge, n.bytes, {{"dataset", name}, store}));
  }
  out.push_back(Family("stoker_server_storage_dataset_fetched_bytes_total",
                       "Bytes fetched from the store for a dataset (its copy, and streamed shards each time one is "
                       "fetched): over an epoch, divided by stoker_server_storage_dataset_bytes and summed over the "
                       "pool, the times the epoch read the dataset",
                       MetricType::Counter));
  for (const auto& [name, n] : r.cache.names) {
    out.back().metric.push_back(Value(MetricType::Counter, n.fetched_bytes, {{"dataset", name}, store}));
  }
  one("stoker_server_storage_cache_evicted_bytes_total",
      "Bytes evicted from --cache-dir: earlier runs' datasets, and streamed shards for others", MetricType::Counter,
      r.cache.evicted_bytes, {store});
  one("stoker_server_storage_cache_bytes", "Bytes of datasets held in --cache-dir", MetricType::Gauge,
      r.cache.bytes_cached, {store});
  one("stoker_server_storage_cache_capacity_bytes", "Most bytes --cache-dir may hold (--cache-bytes)",
      MetricType::Gauge, r.cache_capacity_bytes, {store});
  one("stoker_server_storage_fetch_seconds_total",
      "Time dataset opens spent listing the store and copying into --cache-dir, seconds (sessions wait for it)",
      MetricType::Counter, r.cache.ensure_seconds, {store});
  return out;
}

}  // namespace stoker
