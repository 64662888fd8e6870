#include "client/server_set.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace stoker {
namespace {

constexpr char kDnsScheme[] = "dns:///";
// Load-bearing: chunks are about 1 MiB; the server sends at most 64 MiB.
constexpr int kMaxChunkMessageBytes = 64 << 20;
constexpr int kHttp2MaxFrameBytes = (1 << 24) - 1;  // the largest HTTP/2 allows
constexpr int kStreamLookaheadBytes = 16 << 20;
constexpr char kLaneArg[] = "stoker.lane";

}  // namespace

absl::StatusOr<std::vector<std::string>> ResolveHost(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0) return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  std::set<std::string> out;
  for (addrinfo* a = result; a; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {0};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, ip, sizeof ip);
      out.insert(absl::StrCat(ip, ":", port));
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, ip, sizeof ip);
      out.insert(absl::StrCat("[", ip, "]:", port));
    }
  }
  freeaddrinfo(result);
  if (out.empty()) return absl::UnavailableError(absl::StrCat(host, " resolves to no address"));
  return std::vector<std::string>(out.begin(), out.end());
}

absl::StatusOr<std::unique_ptr<ServerSet>> ServerSet::Create(const std::vector<std::string>& targets,
                                                             absl::Duration resolve_interval,
                                                             PreparedSecurity security) {
  if (targets.empty()) return absl::InvalidArgumentError("no servers given");
  std::unique_ptr<ServerSet> set(new ServerSet());
  if (!security.credentials) security.credentials = grpc::InsecureChannelCredentials();
  set->security_ = std::move(security);
  set->description_ = absl::StrJoin(targets, ",");
  set->resolve_interval_ = resolve_interval;
  if (targets.size() == 1 && absl::StartsWith(targets[0], kDnsScheme)) {
    const std::string rest = targets[0].substr(sizeof(kDnsScheme) - 1);
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", targets[0], "': expected dns:///name:port"));
    }
    set->dns_host_ = rest.substr(0, colon);
    set->dns_port_ = rest.substr(colon + 1);
    // The channels dial resolved IPs: the certificate is for the name.
    if (set->security_.server_name.empty()) set->security_.server_name = set->dns_host_;
    auto addresses = ResolveHost(set->dns_host_, set->dns_port_);
    if (!addresses.ok()) return addresses.status();
    {
      absl::MutexLock lock(&set->mu_);
      set->addresses_ = *std::move(addresses);
    }
    set->resolver_ = std::thread([s = set.get()] { s->ResolveLoop(); });
    return set;
  }
  for (const std::string& t : targets) {
    if (t.find(':') == std::string::npos || absl::StartsWith(t, kDnsScheme)) {
      return absl::InvalidArgumentError(absl::StrCat("server '", t, "': expected host:port (or one dns:///name:port)"));
    }
  }
  std::vector<std::string> addresses = targets;
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  absl::MutexLock lock(&set->mu_);
  set->addresses_ = std::move(addresses);
  return set;
}

ServerSet::~ServerSet() {
  stop_.Notify();
  if (resolver_.joinable()) resolver_.join();
}

void ServerSet::ResolveLoop() {
  while (!stop_.WaitForNotificationWithTimeout(resolve_interval_)) {
    auto addresses = ResolveHost(dns_host_, dns_port_);
    if (!addresses.ok()) {
      LOG(WARNING) << "re-resolving " << description_ << ": " << addresses.status() << "; keeping the last answer";
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (*addresses != addresses_) {
      LOG(INFO) << description_ << " now resolves to " << absl::StrJoin(*addresses, ",");
      addresses_ = *std::move(addresses);
    }
  }
}

std::vector<std::string> ServerSet::Addresses() const {
  absl::MutexLock lock(&mu_);
  return addresses_;
}

std::shared_ptr<grpc::Channel> ServerSet::Channel(const std::string& address, int lane) {
  absl::MutexLock lock(&mu_);
  auto it = channels_.find({address, lane});
  if (it != channels_.end()) {
    it->second.used = absl::Now();
    return it->second.channel;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxChunkMessageBytes);
  // Notice a dead peer within seconds: ping every 3 s, give up after 3 more.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Keep pinging while a server works on a batch and sends nothing (gRPC's
  // default stops after 2 pings without data, review 1.16).
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect quickly after a server comes back; our own backoff paces retries.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  // Batches are tens of MB: large HTTP/2 frames, several MB in flight.
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kHttp2MaxFrameBytes);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamLookaheadBytes);
  // Channels with the same target and arguments share one connection; the
  // lane number makes each lane's arguments, so its connection, its own.
  if (lane > 0) args.SetInt(kLaneArg, lane);
  security_.Apply(&args);
  auto channel = grpc::CreateCustomChannel(address, security_.credentials, args);
  channels_.emplace(std::make_pair(address, lane), Held{channel, absl::Now()});
  return channel;
}

int ServerSet::CloseIdle(const std::set<std::string>& in_use, absl::Duration idle) {
  std::vector<std::shared_ptr<grpc::Channel>> closing;  // destroyed outside the lock
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (auto it = channels_.begin(); it != channels_.end();) {
      Held& h = it->second;
      if (in_use.count(it->first.first) || h.channel.use_count() > 1) {  // in the subset, or a stream holds it
        h.used = now;
        ++it;
      } else if (now - h.used >= idle) {
        LOG(INFO) << "closing the channel to " << it->first.first << " (lane " << it->first.second << "): not in "
                  << "this rank's subset for " << absl::FormatDuration(now - h.used);
        closing.push_back(std::move(h.channel));
        it = channels_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return static_cast<int>(closing.size());
}

int ServerSet::channels() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(channels_.size());
}

}  // namespace stoker
