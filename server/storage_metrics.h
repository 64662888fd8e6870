// stoker_server_storage_*: what a remote data root's store and its local
// cache did, as Prometheus metric families read from their counters at each
// scrape (the store's StorageCounters and the mirror's MirrorStats), so that
// dashboards see requests, bytes, retries by reason, request latency and
// cache hits without the storage library knowing Prometheus.
#ifndef STOKER_SERVER_STORAGE_METRICS_H_
#define STOKER_SERVER_STORAGE_METRICS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "storage/storage.h"
#include "storage/store_mirror.h"

namespace stoker {

// One reading of a store and its cache.
struct StorageReading {
  std::string store;  // the store's kind, the `store` label: s3, http, https or catalog
  StorageCounters counters;
  MirrorStats cache;
  int64_t cache_capacity_bytes = 0;
};

class StorageMetrics : public prometheus::Collectable {
 public:
  explicit StorageMetrics(std::function<StorageReading()> read) : read_(std::move(read)) {}
  // Reads `mirror` (which must outlive the collector) and its store.
  static std::shared_ptr<StorageMetrics> ForMirror(StoreMirror* mirror);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<StorageReading()> read_;
};

// The `store` label of a root: its URL scheme (s3, http, https), "catalog"
// for a catalog file, else "file".
std::string StoreKind(const std::string& root);

}  // namespace stoker

#endif  // STOKER_SERVER_STORAGE_METRICS_H_
