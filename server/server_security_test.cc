#include "server/server_security.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(ServerSecurityTest, PeerHostDropsThePort) {
  EXPECT_EQ(PeerHost("ipv4:10.1.2.3:5555"), "ipv4:10.1.2.3");
  EXPECT_EQ(PeerHost("ipv6:[::1]:5555"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("ipv6:[fe80::1%eth0]:80"), "ipv6:[fe80::1%eth0]");
  EXPECT_EQ(PeerHost("unix:/run/stoker.sock"), "unix:/run/stoker.sock");
  EXPECT_EQ(PeerHost("ipv4"), "ipv4");
}

TEST(ServerSecurityTest, WarnsOnlyWhenExposedWithoutProtection) {
  ServerSecurityConfig open;
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"}) {
    EXPECT_EQ(ExposureWarning(host, open), "") << host;
  }
  const std::string warning = ExposureWarning("0.0.0.0", open);
  EXPECT_NE(warning.find("neither TLS"), std::string::npos) << warning;
  EXPECT_NE(warning.find("0.0.0.0"), std::string::npos) << warning;
  EXPECT_NE(ExposureWarning("10.0.0.5", open), "");
  ServerSecurityConfig tls;
  tls.tls_cert = "c.pem";
  tls.tls_key = "k.pem";
  EXPECT_EQ(ExposureWarning("0.0.0.0", tls), "");
  ServerSecurityConfig tokens;
  tokens.auth_token_file = "tokens";
  EXPECT_EQ(ExposureWarning("0.0.0.0", tokens), "");
}

TEST(ServerSecurityTest, RefusesHalfConfiguredTls) {
  ServerSecurityConfig c;
  c.tls_cert = "cert.pem";
  auto creds = MakeServerCredentials(c);
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("--tls-cert and --tls-key go together"), std::string::npos);
  ServerSecurityConfig ca_only;
  ca_only.tls_client_ca = "ca.pem";
  creds = MakeServerCredentials(ca_only);
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("--tls-client-ca needs --tls-cert"), std::string::npos);
  ServerSecurityConfig missing;
  missing.tls_cert = "/nonexistent/cert.pem";
  missing.tls_key = "/nonexistent/key.pem";
  creds = MakeServerCredentials(missing);
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("/nonexistent/cert.pem"), std::string::npos) << creds.status();
  EXPECT_TRUE(MakeServerCredentials(ServerSecurityConfig{}).ok());
}

TEST(ServerSecurityTest, GateNeedsAReadableTokenFile) {
  ServerSecurityConfig c;
  c.auth_token_file = "/nonexistent/tokens";
  auto gate = CallGate::Create(c);
  ASSERT_FALSE(gate.ok());
  EXPECT_NE(gate.status().message().find("--auth-token-file"), std::string::npos) << gate.status();
  EXPECT_TRUE(CallGate::Create(ServerSecurityConfig{}).ok());
}

}  // namespace
}  // namespace stoker
