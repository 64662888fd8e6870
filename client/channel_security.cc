#include "client/channel_security.h"

#include <cstdlib>
#include <fstream>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/secret_set.h"
#include "common/stream_trailers.h"
#include "common/tls_files.h"

namespace stoker {
namespace {

// Client certificates and CA bundles are re-read this often.
constexpr unsigned kRefreshSeconds = 60;

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("auth token file ", path, " cannot be read"));
  std::string line;
  while (std::getline(in, line)) {
    const absl::string_view token = absl::StripAsciiWhitespace(line);
    if (!token.empty() && token.front() != '#') return std::string(token);
  }
  return absl::InvalidArgumentError(absl::StrCat("auth token file ", path, " holds no token"));
}

absl::Status CheckToken(const std::string& token, const std::string& source) {
  if (!HasSpaceOrControl(token)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("the token from ", source, " holds a space or control character"));
}

}  // namespace

void PreparedSecurity::Apply(grpc::ChannelArguments* args) const {
  if (!server_name.empty()) args->SetSslTargetNameOverride(server_name);
}

void PreparedSecurity::Authorize(grpc::ClientContext* context) const {
  if (!token.empty()) context->AddMetadata(kAuthorizationHeader, kBearerPrefix + token);
}

absl::StatusOr<PreparedSecurity> PrepareSecurity(const ChannelSecurity& s) {
  PreparedSecurity prepared;
  if (!s.auth_token_file.empty()) {
    absl::StatusOr<std::string> token = ReadToken(s.auth_token_file);
    if (!token.ok()) return token.status();
    prepared.token = *std::move(token);
  } else if (const char* env = std::getenv(kAuthTokenEnv); env != nullptr && *env != '\0') {
    prepared.token = std::string(absl::StripAsciiWhitespace(env));
  }
  if (absl::Status ok = CheckToken(prepared.token, s.auth_token_file.empty() ? kAuthTokenEnv : s.auth_token_file);
      !ok.ok()) {
    return ok;
  }
  if (s.tls_cert.empty() != s.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs its key: set both --tls-cert and --tls-key, or neither");
  }
  if (s.tls_ca.empty()) {
    if (!s.tls_cert.empty() || !s.tls_server_name.empty()) {
      return absl::InvalidArgumentError(
          "--tls-cert, --tls-key and --tls-server-name need --tls-ca (the CA bundle "
          "the servers' certificates chain to)");
    }
    prepared.credentials = grpc::InsecureChannelCredentials();
    return prepared;
  }
  if (absl::Status ok = CheckCaBundle(s.tls_ca, "--tls-ca"); !ok.ok()) return ok;
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (!s.tls_cert.empty()) {
    if (absl::Status ok = CheckIdentityFiles(s.tls_cert, s.tls_key, "--tls-cert/--tls-key"); !ok.ok()) return ok;
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(s.tls_key, s.tls_cert, s.tls_ca,
                                                                                    kRefreshSeconds);
  } else {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(s.tls_ca, kRefreshSeconds);
  }
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!s.tls_cert.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  prepared.credentials = grpc::experimental::TlsCredentials(options);
  prepared.server_name = s.tls_server_name;
  return prepared;
}

}  // namespace stoker
