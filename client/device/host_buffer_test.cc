#include "client/device/host_buffer.h"

#include <atomic>
#include <vector>

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

// Stands in for pinned memory (cudaHostAlloc/cudaFreeHost), counting calls.
std::atomic<int> scarce_allocs{0}, scarce_releases{0}, wrong_device{0};
HostAllocator ScarceAllocator(int device) {
  HostAllocator a;
  a.device = device;
  a.scarce = true;
  a.allocate = [](size_t size, int d) {
    ++scarce_allocs;
    if (d != 3) ++wrong_device;
    return new uint8_t[size];
  };
  a.release = [](uint8_t* data, int d) {
    ++scarce_releases;
    if (d != 3) ++wrong_device;
    delete[] data;
  };
  return a;
}

// Review 1.10: past host_slots buffers the pool allocated pinned memory on the
// reader thread and freed it (cudaFreeHost synchronises the device) on
// whichever thread dropped the batch; the README says the surplus is plain.
TEST(HostBufferTest, AScarcePoolLendsPlainMemoryPastItsSlotsAndNeverReleasesOnTheHotPath) {
  scarce_allocs = scarce_releases = wrong_device = 0;
  auto pool = HostBufferPool::Create(2, ScarceAllocator(3));  // a temporary: the pool keeps a copy
  for (int round = 0; round < 3; ++round) {
    std::vector<HostBuffer> held;
    for (int i = 0; i < 5; ++i) held.push_back(pool->Get(1000));
    EXPECT_EQ(pool->AllocatorBlocks(), 2);
  }  // each round returns all five
  EXPECT_EQ(scarce_allocs.load(), 2) << "only the first round allocates, and only max_free blocks";
  EXPECT_EQ(scarce_releases.load(), 0) << "no release while the pool lives";
  EXPECT_EQ(pool->FreeCount(), 2);
  HostBuffer outliving = pool->Get(10);  // outlives the pool: released with the copy it holds
  pool.reset();
  EXPECT_EQ(scarce_releases.load(), 1);
  outliving = HostBuffer();
  EXPECT_EQ(scarce_releases.load(), 2);
  EXPECT_EQ(wrong_device.load(), 0) << "the device ordinal reaches the allocator";
}

TEST(HostBufferTest, ReserveFillsThePoolUpToACountAndIsANoOpOnceItHasThem) {
  scarce_allocs = scarce_releases = wrong_device = 0;
  auto pool = HostBufferPool::Create(4, ScarceAllocator(3));
  pool->Reserve(3, 1000);
  EXPECT_EQ(scarce_allocs.load(), 3);
  pool->Reserve(3, 1000);  // e.g. the stager's and then each epoch's
  EXPECT_EQ(scarce_allocs.load(), 3);
  {
    HostBuffer lent = pool->Get(1000);
    pool->Reserve(3, 1000);  // a lent block still counts
    EXPECT_EQ(scarce_allocs.load(), 3);
  }
  pool->Reserve(9, 1000);  // a scarce pool stops at max_free
  EXPECT_EQ(scarce_allocs.load(), 4);
  EXPECT_EQ(pool->FreeCount(), 4);
  EXPECT_EQ(scarce_releases.load(), 0);
}

// Issue 50: the pool follows the prefetch depth. Raised, it makes (and
// reserves) more scarce blocks; lowered, it releases free blocks now and lent
// ones as they come back, until it holds no more than the new count.
TEST(HostBufferTest, MaxFreeFollowsTheDepthBothWays) {
  scarce_allocs = scarce_releases = wrong_device = 0;
  auto pool = HostBufferPool::Create(2, ScarceAllocator(3));
  pool->Reserve(6, 1000);
  EXPECT_EQ(pool->AllocatorBlocks(), 2);
  pool->SetMaxFree(6);
  EXPECT_EQ(pool->max_free(), 6);
  pool->Reserve(6, 1000);
  EXPECT_EQ(pool->AllocatorBlocks(), 6);
  EXPECT_EQ(scarce_allocs.load(), 6);
  {
    std::vector<HostBuffer> lent;
    for (int i = 0; i < 4; ++i) lent.push_back(pool->Get(1000));
    pool->SetMaxFree(3);  // 2 free blocks and 4 lent: the 2 free go now
    EXPECT_EQ(scarce_releases.load(), 2);
    EXPECT_EQ(pool->FreeCount(), 0);
    EXPECT_EQ(pool->AllocatorBlocks(), 4);
  }  // the 4 come back: one is released, 3 kept
  EXPECT_EQ(scarce_releases.load(), 3);
  EXPECT_EQ(pool->FreeCount(), 3);
  EXPECT_EQ(pool->AllocatorBlocks(), 3);
  pool->SetMaxFree(0);  // at least one
  EXPECT_EQ(pool->max_free(), 1);
  EXPECT_EQ(pool->AllocatorBlocks(), 1);
  EXPECT_EQ(wrong_device.load(), 0);
}

// Grow makes a scarce pool's new blocks on the calling thread before it
// lets them be lent, so that Get (a reader thread) never allocates one; it
// never lowers the count, and a plain pool only raises its count.
TEST(HostBufferTest, GrowMakesTheBlocksBeforeRaisingTheCount) {
  scarce_allocs = scarce_releases = wrong_device = 0;
  auto pool = HostBufferPool::Create(2, ScarceAllocator(3));
  pool->Reserve(2, 1000);
  pool->Grow(5, 1000);
  EXPECT_EQ(scarce_allocs.load(), 5);
  EXPECT_EQ(pool->max_free(), 5);
  EXPECT_EQ(pool->FreeCount(), 5);
  {
    std::vector<HostBuffer> lent;
    for (int i = 0; i < 5; ++i) lent.push_back(pool->Get(1000));
    EXPECT_EQ(scarce_allocs.load(), 5) << "Get made a block";
  }
  pool->Grow(3, 1000);  // never lowers
  EXPECT_EQ(pool->max_free(), 5);
  EXPECT_EQ(scarce_releases.load(), 0);
  auto plain = HostBufferPool::Create(1);
  plain->Grow(4, 1000);
  EXPECT_EQ(plain->max_free(), 4);
  EXPECT_EQ(plain->AllocatorBlocks(), 0);
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
