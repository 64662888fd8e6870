#include "client/security_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_ca, "",
          "PEM bundle of CAs the servers' certificates must chain to; set: connect with TLS; empty: plain text");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate chain for servers that require mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert (unencrypted)");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name the servers' certificate must carry when it is not the host in the address; empty: that host "
          "(for dns:///name:port, the name)");
ABSL_FLAG(std::string, auth_token_file, "",
          "File whose first line is the bearer token sent to the servers; empty: $STOKER_AUTH_TOKEN, if set");

namespace stoker {

ChannelSecurity SecurityFromFlags() {
  ChannelSecurity s;
  s.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  s.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  s.tls_key = absl::GetFlag(FLAGS_tls_key);
  s.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  s.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  return s;
}

}  // namespace stoker
