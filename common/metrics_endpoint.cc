#include "common/metrics_endpoint.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace stoker {

std::string HostPort(const std::string& host, int port) {
  const bool ipv6 = !host.empty() && host.find(':') != std::string::npos && host.front() != '[';
  return ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& host, int port,
                                                                        std::shared_ptr<prometheus::Registry> registry,
                                                                        std::shared_ptr<SecretSet> basic_auth) {
  const std::string address = HostPort(host, port);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  exposer->RegisterCollectable(registry);
  if (basic_auth) {
    SecretSet* pairs = basic_auth.get();
    exposer->RegisterAuth([pairs](const std::string& user,
                                  const std::string& password) { return pairs->Contains(user + ":" + password); },
                          "stoker metrics");
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("metrics endpoint on ", address, " has no port"));
  }
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(exposer), ports[0], std::move(basic_auth)));
}

void MetricsEndpoint::Add(std::shared_ptr<prometheus::Collectable> collectable) {
  exposer_->RegisterCollectable(collectable);
  added_.push_back(std::move(collectable));
}

prometheus::Histogram::BucketBoundaries DurationBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 50e-6; v < 110.0; v *= 2) b.push_back(v);
  return b;
}

}  // namespace stoker
