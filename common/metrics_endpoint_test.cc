#include "common/metrics_endpoint.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

// Review 1.19: an IPv6 host was formatted without brackets ("::1:9090").
TEST(MetricsEndpointTest, Ipv6HostsAreBracketed) {
  EXPECT_EQ(HostPort("0.0.0.0", 9090), "0.0.0.0:9090");
  EXPECT_EQ(HostPort("localhost", 1), "localhost:1");
  EXPECT_EQ(HostPort("::", 9090), "[::]:9090");
  EXPECT_EQ(HostPort("::1", 0), "[::1]:0");
  EXPECT_EQ(HostPort("[::1]", 80), "[::1]:80");
}

}  // namespace
}  // namespace stoker
