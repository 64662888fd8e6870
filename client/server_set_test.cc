#include "client/server_set.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(ServerSetTest, ChannelsOfServersOutOfUseThatNothingHoldsAreClosedAndReopenedOnNeed) {
  // Nothing listens on these ports: channels are made without connecting.
  auto set = ServerSet::Create({"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, absl::Seconds(60));
  ASSERT_TRUE(set.ok()) << set.status();
  std::shared_ptr<grpc::Channel> a = (*set)->Channel("127.0.0.1:1");
  std::shared_ptr<grpc::Channel> b = (*set)->Channel("127.0.0.1:2");
  (*set)->Channel("127.0.0.1:3", /*lane=*/1);
  EXPECT_EQ((*set)->Channel("127.0.0.1:1"), a) << "kept while open";
  EXPECT_EQ((*set)->channels(), 3);
  EXPECT_EQ((*set)->CloseIdle({"127.0.0.1:3"}, absl::Seconds(60)), 0) << "none idle for a minute yet";
  b.reset();
  // 1 is held (a stream would hold it), 3 is in use: only 2 goes.
  EXPECT_EQ((*set)->CloseIdle({"127.0.0.1:3"}, absl::ZeroDuration()), 1);
  EXPECT_EQ((*set)->channels(), 2);
  std::shared_ptr<grpc::Channel> again = (*set)->Channel("127.0.0.1:2");
  EXPECT_NE(again, nullptr);
  EXPECT_EQ((*set)->channels(), 3) << "reopened on need";
  again.reset();
  a.reset();
  EXPECT_EQ((*set)->CloseIdle({}, absl::ZeroDuration()), 3);
  EXPECT_EQ((*set)->channels(), 0);
}

}  // namespace
}  // namespace stoker
