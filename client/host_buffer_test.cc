#include "client/host_buffer.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(HostBufferTest, FreedBuffersAreReusedWhenTheyFit) {
  auto pool = HostBufferPool::Create(2);
  const uint8_t* first;
  {
    HostBuffer a = pool->Get(1000);
    first = a.data();
    EXPECT_EQ(a.size(), 1000u);
  }
  EXPECT_EQ(pool->FreeCount(), 1);
  HostBuffer b = pool->Get(800);  // fits in the freed 1000-byte block
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.size(), 800u);
  EXPECT_EQ(pool->FreeCount(), 0);
  HostBuffer c = pool->Get(5000);  // nothing fits: a new block
  EXPECT_NE(c.data(), first);
}

TEST(HostBufferTest, PoolKeepsAtMostMaxFree) {
  auto pool = HostBufferPool::Create(1);
  { HostBuffer a = pool->Get(10), b = pool->Get(10); }
  EXPECT_EQ(pool->FreeCount(), 1);
}

TEST(HostBufferTest, MoveAssignmentReturnsTheOldBuffer) {
  auto pool = HostBufferPool::Create(4);
  HostBuffer a = pool->Get(10);
  a = pool->Get(20);
  EXPECT_EQ(pool->FreeCount(), 1);
  EXPECT_EQ(a.size(), 20u);
}

TEST(HostBufferTest, BuffersOutliveTheirPool) {
  HostBuffer survivor;
  {
    auto pool = HostBufferPool::Create(1);
    survivor = pool->Get(64);
  }
  survivor.data()[63] = 1;  // still valid memory; freed normally later
  EXPECT_EQ(survivor.size(), 64u);
}

}  // namespace
}  // namespace stoker
