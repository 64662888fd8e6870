// The data server's protections (see docs/how-to/security.md): TLS or mutual TLS
// through gRPC's credentials and a certificate provider that re-reads the PEM
// files when they change, bearer tokens checked on every DataService call,
// and a bound on streams per client. The health service is never gated, so
// that probes work without a token. Thread-safe after construction.
#ifndef STOKER_SERVER_SERVER_SECURITY_H_
#define STOKER_SERVER_SERVER_SECURITY_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/secret_set.h"
#include "common/stream_trailers.h"
#include "server/client_streams.h"

namespace stoker {

struct ServerSecurityConfig {
  // TLS: both set, or neither (plain text). PEM certificate chain and key.
  std::string tls_cert;
  std::string tls_key;
  // Mutual TLS: clients must present a certificate signed by a CA in this
  // PEM bundle (needs tls_cert/tls_key).
  std::string tls_client_ca;
  // How often the certificate files are checked for changes.
  absl::Duration tls_reload = absl::Seconds(60);
  // Accepted bearer tokens, one per line (see secret_set.h); empty: no tokens.
  std::string auth_token_file;
  // Streams one client may hold open at once; 0: no limit.
  int max_streams_per_client = 0;

  bool tls() const { return !tls_cert.empty(); }
};

// Checks the configuration and the files it names (INVALID_ARGUMENT naming
// the flag and file), then builds the listening credentials.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ServerSecurityConfig& config);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

// The one warning a server listening beyond loopback with neither TLS nor
// tokens logs at start; empty when none is due.
std::string ExposureWarning(const std::string& host, const ServerSecurityConfig& config);

// "ipv4:10.1.2.3:5555" -> "ipv4:10.1.2.3" (the port changes per connection).
std::string PeerHost(const std::string& peer);

// Admits DataService calls: checks the token and, for streams, the client's
// stream count.
class CallGate {
 public:
  // Reads the token file (INVALID_ARGUMENT naming it).
  static absl::StatusOr<std::unique_ptr<CallGate>> Create(const ServerSecurityConfig& config);

  // OK, or UNAUTHENTICATED with one message for every failure (no token,
  // wrong token, malformed header), so that a caller learns nothing else.
  absl::Status Authenticate(const grpc::CallbackServerContext& context) const;
  // A stream place for the calling client, or RESOURCE_EXHAUSTED.
  absl::StatusOr<std::unique_ptr<ClientStreams::Ticket>> AdmitStream(const grpc::CallbackServerContext& context);
  // The certificate subject under mutual TLS, else the peer's address.
  static std::string ClientIdentity(const grpc::CallbackServerContext& context);

 private:
  CallGate(std::unique_ptr<SecretSet> tokens, int max_streams_per_client)
      : tokens_(std::move(tokens)), streams_(max_streams_per_client) {}
  const std::unique_ptr<SecretSet> tokens_;  // null: no token needed
  ClientStreams streams_;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVER_SECURITY_H_
