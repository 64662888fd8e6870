#include "server/server_security.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/tls_files.h"
#include "glog/logging.h"

namespace stoker {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ServerSecurityConfig& config) {
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: set both or neither");
  }
  if (!config.tls()) {
    if (!config.tls_client_ca.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS)");
    }
    return grpc::InsecureServerCredentials();
  }
  if (absl::Status s = CheckIdentityFiles(config.tls_cert, config.tls_key, "--tls-cert/--tls-key"); !s.ok()) return s;
  const bool mutual = !config.tls_client_ca.empty();
  if (mutual) {
    if (absl::Status s = CheckCaBundle(config.tls_client_ca, "--tls-client-ca"); !s.ok()) return s;
  }
  const unsigned refresh = static_cast<unsigned>(std::max<int64_t>(1, absl::ToInt64Seconds(config.tls_reload)));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      config.tls_key, config.tls_cert, mutual ? config.tls_client_ca : "", refresh);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (mutual) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  LOG(INFO) << (mutual ? "mutual TLS" : "TLS") << " with certificate " << CertificateSubject(config.tls_cert)
            << " from " << config.tls_cert << (mutual ? ", clients verified against " + config.tls_client_ca : "")
            << "; files re-read every " << refresh << " s";
  return grpc::experimental::TlsServerCredentials(options);
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.");
}

std::string ExposureWarning(const std::string& host, const ServerSecurityConfig& config) {
  if (IsLoopbackHost(host) || config.tls() || !config.auth_token_file.empty()) return "";
  return absl::StrCat("listening on ", host,
                      " with neither TLS (--tls-cert/--tls-key) nor tokens (--auth-token-file): anyone who can reach "
                      "this port can read every dataset under --data-root, and batches cross the network in clear "
                      "text (README, \"Security\")");
}

std::string PeerHost(const std::string& peer) {
  // ipv4:1.2.3.4:port, ipv6:[::1]:port, unix:/path (no port)
  if (absl::StartsWith(peer, "unix:")) return peer;
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string::npos || colon == scheme) return peer;
  return peer.substr(0, colon);
}

absl::StatusOr<std::unique_ptr<CallGate>> CallGate::Create(const ServerSecurityConfig& config) {
  std::unique_ptr<SecretSet> tokens;
  if (!config.auth_token_file.empty()) {
    absl::StatusOr<std::unique_ptr<SecretSet>> set = SecretSet::Load(config.auth_token_file);
    if (!set.ok()) return absl::InvalidArgumentError(absl::StrCat("--auth-token-file: ", set.status().message()));
    tokens = *std::move(set);
    LOG(INFO) << "token authentication on: " << tokens->size() << " tokens from " << config.auth_token_file;
  }
  if (config.max_streams_per_client < 0) return absl::InvalidArgumentError("--max-streams-per-client must be >= 0");
  return std::unique_ptr<CallGate>(new CallGate(std::move(tokens), config.max_streams_per_client));
}

absl::Status CallGate::Authenticate(const grpc::CallbackServerContext& context) const {
  if (!tokens_) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthorizationHeader);
  if (it != metadata.end() && metadata.count(kAuthorizationHeader) == 1) {
    const absl::string_view header(it->second.data(), it->second.size());
    if (absl::StartsWith(header, kBearerPrefix) && tokens_->Contains(header.substr(sizeof(kBearerPrefix) - 1))) {
      return absl::OkStatus();
    }
  }
  return absl::UnauthenticatedError(
      "this server needs a bearer token (authorization metadata) and none of its tokens was presented");
}

absl::StatusOr<std::unique_ptr<ClientStreams::Ticket>> CallGate::AdmitStream(
    const grpc::CallbackServerContext& context) {
  return streams_.Admit(ClientIdentity(context));
}

std::string CallGate::ClientIdentity(const grpc::CallbackServerContext& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth) {
    for (const grpc::string_ref& subject : auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
      return absl::StrCat("subject:", absl::string_view(subject.data(), subject.size()));
    }
  }
  return PeerHost(context.peer());
}

}  // namespace stoker
