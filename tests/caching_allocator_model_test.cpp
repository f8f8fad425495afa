#include "allocators/caching_allocator_model.h"

#include <gtest/gtest.h>

namespace oomguard {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;
using Model = CachingAllocatorModel;

// One segment's blocks as (size, allocated) pairs, for compact expectations.
std::vector<std::pair<int64_t, bool>> Layout(const ModelSegmentView& segment) {
  std::vector<std::pair<int64_t, bool>> layout;
  for (const ModelBlockView& block : segment.blocks) layout.emplace_back(block.size_bytes, block.allocated);
  return layout;
}

using L = std::vector<std::pair<int64_t, bool>>;

TEST(CachingAllocatorModel, RoundSizeUsesWholeMultiplesOf512) {
  EXPECT_EQ(Model::RoundSize(1), 512);
  EXPECT_EQ(Model::RoundSize(511), 512);
  EXPECT_EQ(Model::RoundSize(512), 512);
  EXPECT_EQ(Model::RoundSize(513), 1024);
  EXPECT_EQ(Model::RoundSize(kMiB + 1), kMiB + 512);
}

TEST(CachingAllocatorModel, AllocationSizePicksTheSegmentSize) {
  EXPECT_EQ(Model::AllocationSize(512), 2 * kMiB);          // small: kSmallBuffer
  EXPECT_EQ(Model::AllocationSize(kMiB), 2 * kMiB);         // 1 MiB is still small
  EXPECT_EQ(Model::AllocationSize(kMiB + 512), 20 * kMiB);  // large under 10 MiB: kLargeBuffer
  EXPECT_EQ(Model::AllocationSize(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(Model::AllocationSize(10 * kMiB), 10 * kMiB);  // not < kMinLargeAlloc: 2 MiB multiple
  EXPECT_EQ(Model::AllocationSize(11 * kMiB), 12 * kMiB);  // 11 MiB rounds up to 12 MiB
  EXPECT_EQ(Model::AllocationSize(12 * kMiB), 12 * kMiB);
}

TEST(CachingAllocatorModel, OneByteTakesA512ByteBlockOfA2MiBSegment) {
  Model model;
  std::optional<uint64_t> a = model.Allocate(1);
  ASSERT_TRUE(a);
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.allocated_bytes.current, 512);  // round_size(1) = 512
  EXPECT_EQ(s.requested_bytes.current, 1);
  EXPECT_EQ(s.reserved_bytes.current, 2 * kMiB);  // small pool segment: kSmallBuffer
  EXPECT_EQ(s.segments.current, 1);
  EXPECT_EQ(s.allocations.current, 1);
  EXPECT_EQ(s.num_device_alloc, 1);
  std::vector<ModelSegmentView> segments = model.Segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_TRUE(segments[0].small_pool);
  EXPECT_EQ(segments[0].address, *a);
  // remainder 2 MiB - 512 >= 512: split in the small pool
  EXPECT_EQ(Layout(segments[0]), (L{{512, true}, {2 * kMiB - 512, false}}));
}

TEST(CachingAllocatorModel, ThreeMiBSplitsA20MiBSegment) {
  Model model;
  ASSERT_TRUE(model.Allocate(3 * kMiB));
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.allocated_bytes.current, 3 * kMiB);
  EXPECT_EQ(s.reserved_bytes.current, 20 * kMiB);  // 1 MiB < 3 MiB < 10 MiB: kLargeBuffer
  std::vector<ModelSegmentView> segments = model.Segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_FALSE(segments[0].small_pool);
  // remainder 20 - 3 = 17 MiB > 1 MiB: split
  EXPECT_EQ(Layout(segments[0]), (L{{3 * kMiB, true}, {17 * kMiB, false}}));
}

TEST(CachingAllocatorModel, ElevenMiBTakesAWhole12MiBSegment) {
  Model model;
  ASSERT_TRUE(model.Allocate(11 * kMiB));
  CachingAllocatorModelStats s = model.stats();
  // segment: 11 MiB rounded up to 2 MiB = 12 MiB; remainder 1 MiB is not > 1 MiB: no split
  EXPECT_EQ(s.reserved_bytes.current, 12 * kMiB);
  EXPECT_EQ(s.allocated_bytes.current, 12 * kMiB);
  EXPECT_EQ(s.requested_bytes.current, 11 * kMiB);
  EXPECT_EQ(Layout(model.Segments()[0]), (L{{12 * kMiB, true}}));
}

TEST(CachingAllocatorModel, LargeSplitNeedsMoreThan1MiBLeft) {
  Model whole;
  ASSERT_TRUE(whole.Allocate(19 * kMiB));  // 20 MiB segment, remainder exactly 1 MiB: handed out whole
  EXPECT_EQ(whole.stats().allocated_bytes.current, 20 * kMiB);
  Model split;
  ASSERT_TRUE(split.Allocate(19 * kMiB - 512));  // remainder 1 MiB + 512: split
  EXPECT_EQ(split.stats().allocated_bytes.current, 19 * kMiB - 512);
  EXPECT_EQ(Layout(split.Segments()[0]), (L{{19 * kMiB - 512, true}, {kMiB + 512, false}}));
}

TEST(CachingAllocatorModel, AFreedBlockIsCachedAndReused) {
  Model model;
  std::optional<uint64_t> a = model.Allocate(3 * kMiB);
  ASSERT_TRUE(a);
  ASSERT_TRUE(model.Free(*a));
  // freed 3 MiB merges with the free 17 MiB: one free 20 MiB block, still reserved
  EXPECT_EQ(model.stats().allocated_bytes.current, 0);
  EXPECT_EQ(model.stats().reserved_bytes.current, 20 * kMiB);
  EXPECT_EQ(Layout(model.Segments()[0]), (L{{20 * kMiB, false}}));

  std::optional<uint64_t> b = model.Allocate(2 * kMiB);
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, *a);  // the cached block, split again: 2 MiB + 18 MiB
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.reserved_bytes.current, 20 * kMiB);
  EXPECT_EQ(s.num_device_alloc, 1);
  EXPECT_EQ(s.allocated_bytes.current, 2 * kMiB);
  EXPECT_EQ(s.allocated_bytes.peak, 3 * kMiB);
  EXPECT_EQ(Layout(model.Segments()[0]), (L{{2 * kMiB, true}, {18 * kMiB, false}}));
}

TEST(CachingAllocatorModel, BestFitTakesTheSmallestFittingBlockThenTheLowestAddress) {
  Model model;
  // Three whole segments (>= 10 MiB, 2 MiB multiples, no remainder): 14 MiB lowest, then 12, 12.
  std::optional<uint64_t> b14 = model.Allocate(14 * kMiB);
  std::optional<uint64_t> a12 = model.Allocate(12 * kMiB);
  std::optional<uint64_t> c12 = model.Allocate(12 * kMiB);
  ASSERT_TRUE(b14 && a12 && c12);
  ASSERT_LT(*b14, *a12);
  ASSERT_LT(*a12, *c12);
  ASSERT_TRUE(model.Free(*b14));
  ASSERT_TRUE(model.Free(*c12));
  ASSERT_TRUE(model.Free(*a12));

  // 11 MiB: the free (size, address) order is (12, a12) (12, c12) (14, b14); first >= 11 MiB is a12;
  // remainder 1 MiB: no split, so the whole 12 MiB block is allocated.
  EXPECT_EQ(model.Allocate(11 * kMiB), a12);
  EXPECT_EQ(model.Allocate(12 * kMiB), c12);
  EXPECT_EQ(model.Allocate(13 * kMiB), b14);  // remainder 1 MiB again: whole 14 MiB
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.allocated_bytes.current, 38 * kMiB);  // 12 + 12 + 14
  EXPECT_EQ(s.requested_bytes.current, 36 * kMiB);  // 11 + 12 + 13
  EXPECT_EQ(s.reserved_bytes.current, 38 * kMiB);
  EXPECT_EQ(s.num_device_alloc, 3);
}

TEST(CachingAllocatorModel, FreeCoalescesWithFreeNeighboursOnly) {
  Model model;
  // round_size(1000) = 1024; all three come from one 2 MiB small segment, in address order.
  std::optional<uint64_t> x = model.Allocate(1000);
  std::optional<uint64_t> y = model.Allocate(1000);
  std::optional<uint64_t> z = model.Allocate(1000);
  ASSERT_TRUE(x && y && z);
  EXPECT_EQ(*y, *x + 1024);
  EXPECT_EQ(*z, *x + 2048);
  EXPECT_EQ(model.stats().allocated_bytes.current, 3 * kKiB);
  EXPECT_EQ(model.stats().requested_bytes.current, 3000);

  ASSERT_TRUE(model.Free(*x));  // next (y) is allocated: stays 1 KiB
  ASSERT_TRUE(model.Free(*z));  // merges with the free tail: 2 MiB - 2 KiB
  EXPECT_EQ(Layout(model.Segments()[0]), (L{{kKiB, false}, {kKiB, true}, {2 * kMiB - 2 * kKiB, false}}));
  ASSERT_TRUE(model.Free(*y));  // merges with both: the whole segment again
  EXPECT_EQ(Layout(model.Segments()[0]), (L{{2 * kMiB, false}}));
  EXPECT_EQ(model.Segments()[0].blocks[0].address, *x);
  EXPECT_EQ(model.stats().reserved_bytes.current, 2 * kMiB);
}

TEST(CachingAllocatorModel, FragmentationFailsBelowTheCap) {
  Model model(32 * kMiB);
  std::optional<uint64_t> a = model.Allocate(3 * kMiB);   // 20 MiB segment: [a 3][17 free]
  std::optional<uint64_t> b = model.Allocate(12 * kMiB);  // best fit 17 MiB, 5 MiB left > 1 MiB: split
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(model.Free(*a));  // [3 free][b 12][5 free]: b keeps the free pieces apart
  EXPECT_EQ(Layout(model.Segments()[0]), (L{{3 * kMiB, false}, {12 * kMiB, true}, {5 * kMiB, false}}));

  // 6 MiB: no free block >= 6 MiB; a new 20 MiB segment makes 40 MiB > 32; the cache holds no whole
  // free segment, so the retry fails too. Allocated 12 MiB + 6 MiB = 18 MiB is well under the cap.
  EXPECT_FALSE(model.Allocate(6 * kMiB));
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.allocated_bytes.current, 12 * kMiB);
  EXPECT_EQ(s.reserved_bytes.current, 20 * kMiB);
  EXPECT_EQ(s.num_device_free, 0);
}

TEST(CachingAllocatorModel, RetryReleasesWholeFreeSegmentsThenSucceeds) {
  Model model(40 * kMiB);
  std::optional<uint64_t> a = model.Allocate(12 * kMiB);
  std::optional<uint64_t> b = model.Allocate(12 * kMiB);
  std::optional<uint64_t> c = model.Allocate(12 * kMiB);  // reserved 36 MiB
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(model.Free(*a));
  ASSERT_TRUE(model.Free(*c));
  // 16 MiB: cached 12 MiB blocks are too small; 36 + 16 = 52 > 40: release a's and c's segments
  // (reserved 12 MiB), retry: 12 + 16 = 28 <= 40.
  ASSERT_TRUE(model.Allocate(16 * kMiB));
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_device_free, 2);
  EXPECT_EQ(s.reserved_bytes.current, 28 * kMiB);
  EXPECT_EQ(s.reserved_bytes.peak, 36 * kMiB);
  EXPECT_EQ(s.allocated_bytes.current, 28 * kMiB);
  EXPECT_EQ(s.segments.current, 2);
}

TEST(CachingAllocatorModel, RetryAlsoReleasesTheSmallPool) {
  Model model(21 * kMiB);
  std::optional<uint64_t> s1 = model.Allocate(1);  // 2 MiB small segment
  ASSERT_TRUE(s1);
  ASSERT_TRUE(model.Free(*s1));
  // 20 MiB request: segment 20 MiB; 2 + 20 = 22 > 21; the retry releases the cached small segment.
  ASSERT_TRUE(model.Allocate(20 * kMiB));
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.reserved_bytes.current, 20 * kMiB);
  EXPECT_EQ(s.segments.current, 1);
}

TEST(CachingAllocatorModel, ACapEqualToReservedIsAllowed) {
  Model model(20 * kMiB);
  ASSERT_TRUE(model.Allocate(3 * kMiB));    // 0 + 20 MiB == cap: allowed (only > refuses)
  EXPECT_FALSE(model.Allocate(18 * kMiB));  // 17 MiB cached is too small; 20 + 18 > 20
  EXPECT_EQ(model.stats().num_ooms, 1);
  EXPECT_EQ(model.stats().num_alloc_retries, 1);
}

TEST(CachingAllocatorModel, EmptyCacheReleasesOnlyFullyFreeSegments) {
  Model model;
  std::optional<uint64_t> whole = model.Allocate(12 * kMiB);  // 12 MiB segment
  std::optional<uint64_t> part = model.Allocate(3 * kMiB);    // 20 MiB segment, split
  std::optional<uint64_t> tiny = model.Allocate(1);           // 2 MiB small segment
  ASSERT_TRUE(whole && part && tiny);
  ASSERT_TRUE(model.Free(*whole));
  ASSERT_TRUE(model.Free(*tiny));
  model.EmptyCache();  // 12 MiB and 2 MiB go; the 20 MiB segment holds `part`
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.reserved_bytes.current, 20 * kMiB);
  EXPECT_EQ(s.reserved_bytes.peak, 34 * kMiB);  // 12 + 20 + 2
  EXPECT_EQ(s.segments.current, 1);
  EXPECT_EQ(s.num_device_free, 2);
  EXPECT_EQ(s.num_alloc_retries, 0);  // emptyCache is not a retry

  ASSERT_TRUE(model.Free(*part));
  model.EmptyCache();
  EXPECT_EQ(model.stats().reserved_bytes.current, 0);
  EXPECT_TRUE(model.Segments().empty());
}

TEST(CachingAllocatorModel, ResetPeaksStartsFromTheCurrentValues) {
  Model model;
  std::optional<uint64_t> a = model.Allocate(3 * kMiB);
  ASSERT_TRUE(a && model.Free(*a));
  model.ResetPeaks();
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.allocated_bytes.peak, 0);
  EXPECT_EQ(s.requested_bytes.peak, 0);
  EXPECT_EQ(s.reserved_bytes.peak, 20 * kMiB);  // still cached
}

TEST(CachingAllocatorModel, ZeroBytesAndBadFreesChangeNothing) {
  Model model;
  EXPECT_EQ(model.Allocate(0), uint64_t{0});
  EXPECT_TRUE(model.Free(0));
  EXPECT_EQ(model.stats().reserved_bytes.current, 0);
  std::optional<uint64_t> a = model.Allocate(100);
  ASSERT_TRUE(a);
  EXPECT_FALSE(model.Free(*a + 512));  // the free tail is not a handed-out block
  EXPECT_TRUE(model.Free(*a));
  EXPECT_FALSE(model.Free(*a));  // double free
  EXPECT_EQ(model.stats().allocations.current, 0);
}

}  // namespace
}  // namespace oomguard
