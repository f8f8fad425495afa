#include "allocators/cuda_model_feed.h"

#include <gtest/gtest.h>

#include "allocators/device_account.h"

#include <c10/util/Exception.h>

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

// Note [One decision point]: the ledger admits 100 B + 1.5 MiB under a 3 MiB cap, but the model
// holds a 2 MiB small-pool segment for the 100 B (one 512 B block) and a 1.5 MiB request needs a
// large-pool segment of 20 MiB (get_allocation_size under 10 MiB): 2 + 20 > 3 MiB, and releasing the
// cache frees nothing (the small segment is in use). So the request fails as on the GPU.
TEST(CudaModelFeed, ADecidingFeedRefusesWhatTheLedgerAdmits) {
  DeviceAccount account("test");
  ScopedLimits limits(account, LimitsForCap(3 * kMiB));
  CudaModelFeed feed(3 * kMiB, {}, ModelRole::kDecides);
  ScopedModelFeed attach(account, &feed);
  const int origin = account.Charge(100);
  account.TraceAlloc(0x1000, 100);
  try {
    (void)account.Charge(3 * kMiB / 2);
    FAIL() << "expected an OOM";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_EQ(e.msg(),
              "TEST out of memory (oomguard cap on reserved bytes, as on the GPU). Tried to allocate 1.50 MiB. "
              "PyTorch's caching allocator: reserved 2.00 MiB (allocated 512 bytes) + a 20.00 MiB segment would pass "
              "the cap 3.00 MiB (3145728 bytes), even after releasing its cache. 100 bytes is live in tensors.");
  }
  const LedgerStats ledger = account.ledger().Snapshot();
  EXPECT_EQ(ledger.live_bytes, 100);
  EXPECT_EQ(ledger.peak_bytes, 100);  // the refused request raised no peak
  EXPECT_EQ(ledger.failed_count, 1);
  EXPECT_EQ(account.last_refusal().requested_bytes, 3 * kMiB / 2);
  EXPECT_EQ(feed.stats().num_ooms, 1);
  account.TraceFree(0x1000, 100);
  account.Refund(100, origin);
  EXPECT_EQ(feed.stats().allocated_bytes.current, 0);
}

TEST(CudaModelFeed, APredictingFeedCountsTheOomAndTheLedgerDecides) {
  DeviceAccount account("test");
  ScopedLimits limits(account, LimitsForCap(3 * kMiB));
  CudaModelFeed feed(3 * kMiB);
  ScopedModelFeed attach(account, &feed);
  const int small = account.Charge(100);
  account.TraceAlloc(0x1000, 100);
  const int large = account.Charge(3 * kMiB / 2);  // the model refuses; the ledger admits
  account.TraceAlloc(0x2000, 3 * kMiB / 2);
  EXPECT_EQ(feed.stats().num_ooms, 1);
  EXPECT_EQ(account.ledger().live_bytes(), 100 + 3 * kMiB / 2);
  account.TraceFree(0x2000, 3 * kMiB / 2);  // never in the model: ignored
  account.Refund(3 * kMiB / 2, large);
  account.TraceFree(0x1000, 100);
  account.Refund(100, small);
  EXPECT_EQ(feed.stats().allocated_bytes.current, 0);
}

TEST(CudaModelFeed, UnchargeGivesTheModelsBlockBack) {
  DeviceAccount account("test");
  CudaModelFeed feed(CachingAllocatorModel::kUnlimited, {}, ModelRole::kDecides);
  ScopedModelFeed attach(account, &feed);
  const int origin = account.Charge(4096);
  EXPECT_EQ(feed.stats().allocated_bytes.current, 4096);
  account.Uncharge(4096, origin);  // the system allocator failed: no tensor, no TraceAlloc
  EXPECT_EQ(feed.stats().allocated_bytes.current, 0);
  EXPECT_EQ(account.ledger().live_bytes(), 0);
  account.TraceAlloc(0x3000, 512);  // a later tensor without Admit (allocated before attaching): allocated now
  EXPECT_EQ(feed.stats().allocated_bytes.current, 512);
}

TEST(CudaModelFeed, TheModelGetsTheConfig) {
  std::string error;
  CudaModelFeed feed(CachingAllocatorModel::kUnlimited,
                     *ParseCachingAllocatorConfig("expandable_segments:True,pinned_use_cuda_host_register:True", &error));
  EXPECT_TRUE(feed.config().expandable_segments);
  EXPECT_EQ(feed.config().unmodelled_keys, std::vector<std::string>{"pinned_use_cuda_host_register"});
}

}  // namespace
}  // namespace oomguard
