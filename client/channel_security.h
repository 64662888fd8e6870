// How a client reaches protected data servers (docs/how-to/security.md): TLS with
// a CA bundle (gRPC's TLS credentials over a certificate provider that
// re-reads the files when they change), an optional client certificate for
// mutual TLS, and a bearer token sent with every DataService call, read from
// a file or $STOKER_AUTH_TOKEN. Thread-compatible config; the prepared
// credentials are thread-safe.
#ifndef STOKER_CLIENT_CHANNEL_SECURITY_H_
#define STOKER_CLIENT_CHANNEL_SECURITY_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace stoker {

// Where a client finds its token when no file is named (load-bearing: the
// deployment files and README name it).
inline constexpr char kAuthTokenEnv[] = "STOKER_AUTH_TOKEN";

struct ChannelSecurity {
  // PEM bundle of CAs the servers' certificates must chain to; set: TLS.
  std::string tls_ca;
  // Client certificate chain and key for mutual TLS (both or neither; need tls_ca).
  std::string tls_cert;
  std::string tls_key;
  // Name the server certificate must carry, when it differs from the host in
  // the address (e.g. servers reached by IP with a certificate for a DNS name).
  std::string tls_server_name;
  // File whose first line (not a '#' comment) is the token; empty: the token
  // is $STOKER_AUTH_TOKEN if set, else none.
  std::string auth_token_file;
};

// Credentials and per-call metadata built from a ChannelSecurity.
struct PreparedSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string server_name;  // empty: the address's host
  std::string token;        // empty: none sent

  // Adds the channel arguments (server-name override).
  void Apply(grpc::ChannelArguments* args) const;
  // Adds the token to a call.
  void Authorize(grpc::ClientContext* context) const;
};

// Checks the files (INVALID_ARGUMENT naming the option and file) and builds
// the credentials; plain text when tls_ca is empty.
absl::StatusOr<PreparedSecurity> PrepareSecurity(const ChannelSecurity& security);

}  // namespace stoker

#endif  // STOKER_CLIENT_CHANNEL_SECURITY_H_
