#include "allocators/cuda_model_feed.h"

#include <gtest/gtest.h>

#include "allocators/device_account.h"

namespace oomguard {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

TEST(CudaModelFeed, MapsTensorAddressesToModelBlocks) {
  CudaModelFeed feed;
  feed.OnAlloc(0x1000, 100);       // 512-byte block of a 2 MiB small segment
  feed.OnAlloc(0x9000, 3 * kMiB);  // 3 MiB block of a 20 MiB segment
  feed.OnFree(0x1000);
  feed.OnFree(0x1000);  // already freed: ignored
  feed.OnFree(0x5555);  // never seen: ignored
  CachingAllocatorModelStats s = feed.stats();
  EXPECT_EQ(s.allocated_bytes.current, 3 * kMiB);
  EXPECT_EQ(s.allocated_bytes.peak, 3 * kMiB + 512);
  EXPECT_EQ(s.requested_bytes.peak, 3 * kMiB + 100);
  EXPECT_EQ(s.reserved_bytes.current, 22 * kMiB);  // 2 + 20, both cached
}

TEST(CudaModelFeed, AnAddressReusedAfterItsFreeIsANewBlock) {
  CudaModelFeed feed;
  feed.OnAlloc(0x1000, 12 * kMiB);  // whole 12 MiB segment
  feed.OnFree(0x1000);
  feed.OnAlloc(0x1000, 11 * kMiB);  // the cached 12 MiB block, handed out whole
  CachingAllocatorModelStats s = feed.stats();
  EXPECT_EQ(s.allocated_bytes.current, 12 * kMiB);
  EXPECT_EQ(s.reserved_bytes.current, 12 * kMiB);
  EXPECT_EQ(s.num_device_alloc, 1);
}

TEST(CudaModelFeed, ARefusedRequestCountsAnOomAndItsFreeIsIgnored) {
  CudaModelFeed feed(20 * kMiB);
  feed.OnAlloc(0x1000, 3 * kMiB);   // 20 MiB segment: reserved == cap
  feed.OnAlloc(0x2000, 18 * kMiB);  // 17 MiB cached is too small, 20 + 18 > 20: refused
  feed.OnFree(0x2000);
  CachingAllocatorModelStats s = feed.stats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.allocated_bytes.current, 3 * kMiB);
}

TEST(CudaModelFeed, TheAccountFeedsItOnlyWhileAttached) {
  DeviceAccount account("test");
  CudaModelFeed feed;
  EXPECT_FALSE(account.wants_addresses());
  account.TraceAlloc(0x1000, 100);  // not attached yet: unseen
  {
    ScopedModelFeed attach(account, &feed);
    EXPECT_TRUE(account.wants_addresses());
    account.TraceAlloc(0x2000, 1000);
    account.TraceFree(0x1000, 100);  // allocated before: ignored
  }
  EXPECT_FALSE(account.wants_addresses());
  account.TraceFree(0x2000, 1000);  // detached: the model still holds it
  CachingAllocatorModelStats s = feed.stats();
  EXPECT_EQ(s.allocated_bytes.current, 1024);
  EXPECT_EQ(s.requested_bytes.current, 1000);
}

}  // namespace
}  // namespace oomguard
