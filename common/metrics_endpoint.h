// Serves a prometheus-cpp registry over HTTP (/metrics, Prometheus text
// format) and shared helpers for metric definitions. Thread-safe; the
// endpoint stops serving when destroyed. The registry is shared with the
// components that record into it.
#ifndef STOKER_COMMON_METRICS_ENDPOINT_H_
#define STOKER_COMMON_METRICS_ENDPOINT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/secret_set.h"
#include "prometheus/exposer.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace stoker {

// "host:port", with an IPv6 host in brackets ("[::1]:9090") as the HTTP
// server expects (review 1.19).
std::string HostPort(const std::string& host, int port);

class MetricsEndpoint {
 public:
  // Binds host:port (port 0 picks a free one) and serves `registry`.
  // UNAVAILABLE if the address cannot be bound. With `basic_auth` (accepted
  // "user:password" pairs), scrapes need HTTP basic auth with one of them.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& host, int port,
                                                                std::shared_ptr<prometheus::Registry> registry,
                                                                std::shared_ptr<SecretSet> basic_auth = nullptr);

  int port() const { return port_; }
  // Serves `collectable` too (read at each scrape), for as long as the endpoint lives.
  void Add(std::shared_ptr<prometheus::Collectable> collectable);

 private:
  MetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer, int port, std::shared_ptr<SecretSet> basic_auth)
      : basic_auth_(std::move(basic_auth)), exposer_(std::move(exposer)), port_(port) {}
  std::shared_ptr<SecretSet> basic_auth_;                        // outlives the exposer, whose handler uses it
  std::vector<std::shared_ptr<prometheus::Collectable>> added_;  // outlive the exposer, which holds weak pointers
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
};

// Histogram buckets for durations in seconds: 50 us .. ~100 s, doubling.
prometheus::Histogram::BucketBoundaries DurationBuckets();

}  // namespace stoker

#endif  // STOKER_COMMON_METRICS_ENDPOINT_H_
