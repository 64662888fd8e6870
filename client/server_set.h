// The data servers a client talks to: a fixed list of host:port, or a DNS
// name (`dns:///name:port`) re-resolved periodically, so that servers behind a
// Kubernetes headless Service (or any name with several addresses) join and
// leave. Holds one channel per address, configured for big messages and fast
// dead-peer detection. Thread-safe.
#ifndef STOKER_CLIENT_SERVER_SET_H_
#define STOKER_CLIENT_SERVER_SET_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/channel_security.h"

namespace stoker {

class ServerSet {
 public:
  // `targets`: host:port entries, or a single dns:///name:port. DNS names are
  // resolved now (INVALID_ARGUMENT if a target does not parse, UNAVAILABLE if
  // the name resolves to nothing) and then every `resolve_interval`.
  // Channels use `security` (null credentials: plain text); under TLS a DNS
  // name's addresses are checked against the name, not the IP.
  static absl::StatusOr<std::unique_ptr<ServerSet>> Create(const std::vector<std::string>& targets,
                                                           absl::Duration resolve_interval,
                                                           PreparedSecurity security = {});
  ~ServerSet();

  // The current addresses (host:port), sorted.
  std::vector<std::string> Addresses() const;
  // The channel for an address (created on first use, then kept). Each lane
  // is a channel of its own, with its own TCP connection: a server sends one
  // connection's data on one thread at a time, so a client that opens
  // several streams to one server opens them on different lanes.
  std::shared_ptr<grpc::Channel> Channel(const std::string& address, int lane = 0);
  // Closes the channels of servers not in `in_use` that nothing has used for
  // `idle` (no stream holds them, Channel has not handed them out): a
  // server that left the rank's subset costs no connection, pings or
  // buffers; Channel opens it again on need. Returns how many it closed.
  int CloseIdle(const std::set<std::string>& in_use, absl::Duration idle);
  // Channels open now (for metrics and tests).
  int channels() const;
  // Adds the token (if any) to a call.
  void Authorize(grpc::ClientContext* context) const { security_.Authorize(context); }
  // What the set was made from, for messages.
  const std::string& description() const { return description_; }

 private:
  ServerSet() = default;
  void ResolveLoop();

  std::string description_;
  PreparedSecurity security_;
  std::string dns_host_, dns_port_;  // empty for a fixed list
  absl::Duration resolve_interval_;
  absl::Notification stop_;
  std::thread resolver_;

  mutable absl::Mutex mu_;
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);
  struct Held {
    std::shared_ptr<grpc::Channel> channel;
    absl::Time used;  // last handed out, or seen held or in use by CloseIdle
  };
  std::map<std::pair<std::string, int>, Held> channels_ ABSL_GUARDED_BY(mu_);
};

// Resolves host to "ip:port" entries ([ip]:port for IPv6) with getaddrinfo.
absl::StatusOr<std::vector<std::string>> ResolveHost(const std::string& host, const std::string& port);

}  // namespace stoker

#endif  // STOKER_CLIENT_SERVER_SET_H_
