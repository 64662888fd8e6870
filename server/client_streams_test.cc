#include "server/client_streams.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(ClientStreamsTest, BoundsEachClientSeparately) {
  ClientStreams streams(2);
  auto a1 = streams.Admit("CN=a");
  auto a2 = streams.Admit("CN=a");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = streams.Admit("CN=a");
  ASSERT_FALSE(a3.ok());
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(a3.status().message().find("--max-streams-per-client 2"), std::string::npos) << a3.status();
  EXPECT_EQ(a3.status().message().find("CN=a"), std::string::npos) << "names the client";
  auto b1 = streams.Admit("CN=b");  // another client is not held up
  EXPECT_TRUE(b1.ok());
  a1->reset();  // a stream ends: room again
  EXPECT_EQ(streams.streams("CN=a"), 1);
  EXPECT_TRUE(streams.Admit("CN=a").ok());
}

TEST(ClientStreamsTest, ZeroCountsWithoutLimit) {
  ClientStreams streams(0);
  std::vector<std::unique_ptr<ClientStreams::Ticket>> held;
  for (int i = 0; i < 100; ++i) {
    auto t = streams.Admit("ipv4:10.0.0.1");
    ASSERT_TRUE(t.ok());
    held.push_back(*std::move(t));
  }
  EXPECT_EQ(streams.streams("ipv4:10.0.0.1"), 100);
  held.clear();
  EXPECT_EQ(streams.streams("ipv4:10.0.0.1"), 0);
}

}  // namespace
}  // namespace stoker
