// CachingAllocatorModel under PYTORCH_ALLOC_CONF settings: each expectation is derived by hand from
// the rule of c10/cuda/CUDACachingAllocator.cpp the test names.
#include <gtest/gtest.h>

#include <array>

#include "allocators/caching_allocator_config.h"
#include "allocators/caching_allocator_model.h"

namespace oomguard {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;
using Model = CachingAllocatorModel;

CachingAllocatorConfig Settings(std::string_view text) {
  std::string error;
  std::optional<CachingAllocatorConfig> config = ParseCachingAllocatorConfig(text, &error);
  EXPECT_TRUE(config) << error;
  return config.value_or(CachingAllocatorConfig{});
}

// Segment sizes in address order, and whether each holds an allocated block.
std::vector<std::pair<int64_t, bool>> SegmentSizes(const Model& model) {
  std::vector<std::pair<int64_t, bool>> sizes;
  for (const ModelSegmentView& segment : model.Segments()) {
    bool used = false;
    for (const ModelBlockView& block : segment.blocks) used = used || block.allocated;
    sizes.emplace_back(segment.size_bytes, used);
  }
  return sizes;
}

using S = std::vector<std::pair<int64_t, bool>>;

TEST(CachingAllocatorModelSettings, RoundSizeRoundsToTheNextPower2Division) {
  const CachingAllocatorConfig four = Settings("roundup_power2_divisions:4");
  // 1200 KiB: interval 0 (under 2 MiB) has 4 divisions; [1 MiB, 2 MiB) in steps of 256 KiB;
  // 1200 KiB is above 1024 KiB: next step 1280 KiB.
  EXPECT_EQ(Model::RoundSize(1200 * kKiB, four), 1280 * kKiB);
  // 5 MiB + 1: [4 MiB, 8 MiB) in steps of 1 MiB: 6 MiB.
  EXPECT_EQ(Model::RoundSize(5 * kMiB + 1, four), 6 * kMiB);
  EXPECT_EQ(Model::RoundSize(4 * kMiB, four), 4 * kMiB);      // a power of two stays
  EXPECT_EQ(Model::RoundSize(5 * kMiB, four), 5 * kMiB);      // already on a step
  EXPECT_EQ(Model::RoundSize(1500, four), 1536);              // not above 512 * 4: multiple of 512
  EXPECT_EQ(Model::RoundSize(600 * kKiB, four), 640 * kKiB);  // [512 KiB, 1 MiB) in 128 KiB steps
  // One division means none (round_size needs divisions > 1): 5 MiB + 1 -> next 512 bytes.
  EXPECT_EQ(Model::RoundSize(5 * kMiB + 1, Settings("roundup_power2_divisions:1")), 5 * kMiB + 512);
  // The list form: 5 MiB is in interval log2(4) = 2, which [4:2,>:8] gives 2 divisions: steps of
  // 2 MiB in [4 MiB, 8 MiB): 5 MiB + 1 -> 6 MiB; 20 MiB is in interval 4 (> 2): 8 divisions of
  // [16 MiB, 32 MiB), steps of 2 MiB: 20 MiB + 1 -> 22 MiB.
  const CachingAllocatorConfig list = Settings("roundup_power2_divisions:[4:2,>:8]");
  EXPECT_EQ(Model::RoundSize(5 * kMiB + 1, list), 6 * kMiB);
  EXPECT_EQ(Model::RoundSize(20 * kMiB + 1, list), 22 * kMiB);
  EXPECT_EQ(Model::RoundupPower2NextDivision(3 * kMiB - 1, 2), 3 * kMiB);  // [2, 4) MiB in 1 MiB steps
}

TEST(CachingAllocatorModelSettings, RoundupPower2DivisionsChangeAllocatedBytes) {
  Model model(Model::kUnlimited, Settings("roundup_power2_divisions:4"));
  ASSERT_TRUE(model.Allocate(5 * kMiB + 1));  // round_size 6 MiB; a 20 MiB segment (6 < 10 MiB)
  ASSERT_TRUE(model.Allocate(600 * kKiB));    // round_size 640 KiB; a 2 MiB small segment
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.allocated_bytes.current, 6 * kMiB + 640 * kKiB);
  EXPECT_EQ(s.requested_bytes.current, 5 * kMiB + 1 + 600 * kKiB);
  EXPECT_EQ(s.reserved_bytes.current, 22 * kMiB);
}

TEST(CachingAllocatorModelSettings, MaxSplitSizeKeepsOversizeBlocksWhole) {
  Model model(Model::kUnlimited, Settings("max_split_size_mb:20"));
  std::optional<uint64_t> a = model.Allocate(30 * kMiB);  // segment 30 MiB >= 20: oversize
  ASSERT_TRUE(a);
  EXPECT_EQ(model.stats().oversize_segments.current, 1);
  EXPECT_EQ(model.stats().oversize_allocations.current, 1);
  ASSERT_TRUE(model.Free(*a));
  EXPECT_EQ(model.stats().oversize_allocations.current, 0);
  // get_free_block: 12 MiB < 20 and the cached 30 MiB block >= 20: not handed out; a new 12 MiB
  // segment (without the setting: the 30 MiB block, split 12 + 18).
  std::optional<uint64_t> b = model.Allocate(12 * kMiB);
  ASSERT_TRUE(b);
  EXPECT_EQ(model.stats().reserved_bytes.current, 42 * kMiB);
  // 25 MiB >= 20: the 30 MiB block serves it (30 < 25 + 20, max_non_split_rounding), and
  // should_split refuses a request >= max_split_size: allocated 12 + 30 MiB, not 12 + 25.
  std::optional<uint64_t> c = model.Allocate(25 * kMiB);
  ASSERT_TRUE(c);
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.allocated_bytes.current, 42 * kMiB);
  EXPECT_EQ(s.requested_bytes.current, 37 * kMiB);
  EXPECT_EQ(s.reserved_bytes.current, 42 * kMiB);
  EXPECT_EQ(s.oversize_allocations.current, 1);
  EXPECT_EQ(s.oversize_segments.current, 1);
  EXPECT_EQ(SegmentSizes(model), (S{{30 * kMiB, true}, {12 * kMiB, true}}));
}

TEST(CachingAllocatorModelSettings, MaxNonSplitRoundingLimitsTheWasteOfAnOversizeBlock) {
  Model model(Model::kUnlimited, Settings("max_split_size_mb:20"));
  std::optional<uint64_t> a = model.Allocate(60 * kMiB);
  ASSERT_TRUE(a && model.Free(*a));
  // 36 MiB: the cached 60 MiB block >= 36 + 20 (kLargeBuffer): refused; a new 36 MiB segment.
  ASSERT_TRUE(model.Allocate(36 * kMiB));
  EXPECT_EQ(model.stats().reserved_bytes.current, 96 * kMiB);
  // 42 MiB: 60 < 42 + 20: the 60 MiB block, whole.
  ASSERT_TRUE(model.Allocate(42 * kMiB));
  EXPECT_EQ(model.stats().allocated_bytes.current, 96 * kMiB);
  EXPECT_EQ(model.stats().reserved_bytes.current, 96 * kMiB);
  // max_non_split_rounding_mb:64 lets the 60 MiB block serve 36 MiB (60 < 36 + 64).
  Model wide(Model::kUnlimited, Settings("max_split_size_mb:20,max_non_split_rounding_mb:64"));
  std::optional<uint64_t> w = wide.Allocate(60 * kMiB);
  ASSERT_TRUE(w && wide.Free(*w));
  ASSERT_TRUE(wide.Allocate(36 * kMiB));
  EXPECT_EQ(wide.stats().reserved_bytes.current, 60 * kMiB);
  EXPECT_EQ(wide.stats().allocated_bytes.current, 60 * kMiB);
}

TEST(CachingAllocatorModelSettings, ReleaseAvailableCachedBlocksFreesOnlyWhatTheRequestNeeds) {
  Model model(120 * kMiB, Settings("max_split_size_mb:20"));
  std::optional<uint64_t> a = model.Allocate(40 * kMiB);
  std::optional<uint64_t> b = model.Allocate(30 * kMiB);
  std::optional<uint64_t> d = model.Allocate(22 * kMiB);
  ASSERT_TRUE(model.Allocate(24 * kMiB));  // reserved 40 + 30 + 22 + 24 = 116 MiB
  ASSERT_TRUE(a && b && d && model.Free(*a) && model.Free(*b) && model.Free(*d));
  // 12 MiB: every cached block is >= 20 (get_free_block refuses them); 116 + 12 > 120.
  // release_available_cached_blocks: key max(12, 20) = 20, the smallest cached block >= 20 is the
  // 22 MiB one: released alone; 94 + 12 <= 120. Not a retry: the 30 and 40 MiB blocks stay.
  ASSERT_TRUE(model.Allocate(12 * kMiB));
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.reserved_bytes.current, 106 * kMiB);
  EXPECT_EQ(s.num_device_free, 1);
  EXPECT_EQ(s.num_alloc_retries, 0);
  EXPECT_EQ(SegmentSizes(model), (S{{40 * kMiB, false}, {30 * kMiB, false}, {24 * kMiB, true}, {12 * kMiB, true}}));
  // 65 MiB (segment 66 MiB): 106 + 66 > 120; no cached block >= 65: release the largest oversize
  // blocks until they add up to 65: 40 (40 < 65), then 30 (70 >= 65). 36 + 66 = 102 <= 120.
  ASSERT_TRUE(model.Allocate(65 * kMiB));
  s = model.stats();
  EXPECT_EQ(s.reserved_bytes.current, 102 * kMiB);
  EXPECT_EQ(s.num_device_free, 3);
  EXPECT_EQ(s.num_alloc_retries, 0);
  EXPECT_EQ(s.oversize_segments.current, 2);  // 24 and 66 MiB
  EXPECT_EQ(SegmentSizes(model), (S{{24 * kMiB, true}, {12 * kMiB, true}, {66 * kMiB, true}}));
}

// a (30 MiB) and b (24 MiB) are cached, a older than b (measured in the large pool's get_free_block
// calls); a 20 MiB segment holds e (4 MiB). Returns the model after the sequence below.
//   a: call 1, b: call 2, e: call 3 (remainder 16 MiB cached at 3); free a (base 3);
//   f, g (4 MiB each): calls 4 and 5 take the 16 MiB remainder and give it back; free b (base 5).
Model CacheTwoSegmentsOfDifferentAge(int64_t cap, const CachingAllocatorConfig& config) {
  Model model(cap, config);
  std::optional<uint64_t> a = model.Allocate(30 * kMiB);
  std::optional<uint64_t> b = model.Allocate(24 * kMiB);
  EXPECT_TRUE(model.Allocate(4 * kMiB));
  EXPECT_TRUE(a && b && model.Free(*a));
  for (int i = 0; i < 2; ++i) {
    std::optional<uint64_t> f = model.Allocate(4 * kMiB);
    EXPECT_TRUE(f && model.Free(*f));
  }
  EXPECT_TRUE(model.Free(*b));
  return model;
}

TEST(CachingAllocatorModelSettings, GarbageCollectionReleasesOldCachedSegmentsBeforeANewOne) {
  Model model = CacheTwoSegmentsOfDifferentAge(100 * kMiB, Settings("garbage_collection_threshold:0.5"));
  EXPECT_EQ(model.stats().reserved_bytes.current, 74 * kMiB);  // 30 + 24 + 20
  // 40 MiB, call 6: no cached block fits. garbage_collect_cached_blocks: 74 > 0.5 * 100 = 50,
  // target 24 MiB; whole free segments: b (age 6 - 5 = 1), a (age 6 - 3 = 3); average 2: only a
  // is old enough; reclaimed 30 >= 24: done. 44 + 40 = 84 <= 100, no retry.
  ASSERT_TRUE(model.Allocate(40 * kMiB));
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.reserved_bytes.current, 84 * kMiB);
  EXPECT_EQ(s.num_device_free, 1);
  EXPECT_EQ(s.num_alloc_retries, 0);
  EXPECT_EQ(SegmentSizes(model), (S{{24 * kMiB, false}, {20 * kMiB, true}, {40 * kMiB, true}}));
}

TEST(CachingAllocatorModelSettings, GarbageCollectionNeedsACap) {
  // No cap (set_fraction false): no collection; 74 + 40 = 114 MiB.
  Model uncapped = CacheTwoSegmentsOfDifferentAge(Model::kUnlimited, Settings("garbage_collection_threshold:0.5"));
  ASSERT_TRUE(uncapped.Allocate(40 * kMiB));
  EXPECT_EQ(uncapped.stats().reserved_bytes.current, 114 * kMiB);
  EXPECT_EQ(uncapped.stats().num_device_free, 0);
  // A cap without the setting: 114 > 100, so the retry releases a and b: 20 + 40 = 60 MiB.
  Model plain = CacheTwoSegmentsOfDifferentAge(100 * kMiB, CachingAllocatorConfig{});
  ASSERT_TRUE(plain.Allocate(40 * kMiB));
  EXPECT_EQ(plain.stats().reserved_bytes.current, 60 * kMiB);
  EXPECT_EQ(plain.stats().num_alloc_retries, 1);
}

// Expandable segments: one virtual segment per pool; the model's segment views are its mapped
// ranges (snapshot()). Pages: 20 MiB in the large pool, 2 MiB in the small one.
TEST(CachingAllocatorModelSettings, ExpandableSegmentsGrowOneSegmentByWholePages) {
  Model model(Model::kUnlimited, Settings("expandable_segments:True"));
  std::optional<uint64_t> a = model.Allocate(3 * kMiB);  // maps page 0 (20 MiB); split 3 + 17
  std::optional<uint64_t> b = model.Allocate(3 * kMiB);  // the free 17 MiB: split 3 + 14
  // 25 MiB: no free block fits. find_expandable_block: the unmapped range at 20 MiB, with the free
  // 14 MiB before it: 14 + the rest >= 25. Map 25 - 14 = 11 MiB -> page 1 (20 MiB), merged with
  // the 14 MiB: 34 MiB, split 25 + 9. Without the setting: a new 26 MiB segment, 46 MiB reserved.
  std::optional<uint64_t> c = model.Allocate(25 * kMiB);
  ASSERT_TRUE(a && b && c);
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.reserved_bytes.current, 40 * kMiB);
  EXPECT_EQ(s.allocated_bytes.current, 31 * kMiB);
  EXPECT_EQ(s.num_device_alloc, 2);  // two page mappings
  EXPECT_EQ(s.segments.current, 0);  // map_block counts no segment, only reserved bytes
  std::vector<ModelSegmentView> segments = model.Segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_TRUE(segments[0].expandable);
  EXPECT_EQ(segments[0].address, *a);
  EXPECT_EQ(segments[0].size_bytes, 40 * kMiB);
  EXPECT_EQ(*c, *a + 6 * kMiB);
  ASSERT_EQ(segments[0].blocks.size(), 4u);
  EXPECT_EQ(segments[0].blocks[3].size_bytes, 9 * kMiB);
  EXPECT_FALSE(segments[0].blocks[3].allocated);
}

TEST(CachingAllocatorModelSettings, ExpandableSegmentsGiveBackPagesFreeBlocksCoverWhole) {
  Model model(Model::kUnlimited, Settings("expandable_segments:True"));
  std::optional<uint64_t> a = model.Allocate(3 * kMiB);
  std::optional<uint64_t> b = model.Allocate(3 * kMiB);
  std::optional<uint64_t> c = model.Allocate(25 * kMiB);         // as above: [a 3][b 3][c 25][9 free]
  ASSERT_TRUE(a && b && c && model.Free(*b) && model.Free(*c));  // [a 3][37 free], up to 40 MiB
  // emptyCache: the free 3..40 MiB covers page 1 (20..40) whole: unmapped; 3..20 stays mapped.
  model.EmptyCache();
  CachingAllocatorModelStats s = model.stats();
  EXPECT_EQ(s.reserved_bytes.current, 20 * kMiB);
  EXPECT_EQ(s.num_device_free, 1);
  std::vector<ModelSegmentView> segments = model.Segments();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_TRUE(segments[0].expandable);
  EXPECT_EQ(segments[0].size_bytes, 20 * kMiB);
  ASSERT_EQ(segments[0].blocks.size(), 2u);
  EXPECT_EQ(segments[0].blocks[1].size_bytes, 17 * kMiB);
  // Freeing a leaves page 0 free: unmapped, and the segment, without pages, goes.
  ASSERT_TRUE(model.Free(*a));
  model.EmptyCache();
  EXPECT_EQ(model.stats().reserved_bytes.current, 0);
  EXPECT_EQ(model.stats().num_device_free, 2);
  EXPECT_TRUE(model.Segments().empty());
  // The next request opens a new segment (the model never hands out an address range again).
  std::optional<uint64_t> d = model.Allocate(3 * kMiB);
  ASSERT_TRUE(d);
  EXPECT_NE(*d, *a);
  EXPECT_EQ(model.stats().reserved_bytes.current, 20 * kMiB);
}

TEST(CachingAllocatorModelSettings, ExpandableSegmentsCheckTheCapAgainstTheAllocationSize) {
  Model model(35 * kMiB, Settings("expandable_segments:True"));
  // alloc_block checks 0 + get_allocation_size(30 MiB) = 30 <= 35, then maps 2 pages: 40 MiB.
  ASSERT_TRUE(model.Allocate(30 * kMiB));
  EXPECT_EQ(model.stats().reserved_bytes.current, 40 * kMiB);
  ASSERT_TRUE(model.Allocate(5 * kMiB));  // the free 10 MiB tail: split 5 + 5, nothing mapped
  // 12 MiB: 40 + 12 > 35; the retry's unmap finds no whole free page in the free 35..40 MiB.
  EXPECT_FALSE(model.Allocate(12 * kMiB));
  CachingAllocatorModelStats s = model.stats();
  // retries, OOMs, pages unmapped, reserved bytes
  EXPECT_EQ((std::array{s.num_alloc_retries, s.num_ooms, s.num_device_free, s.reserved_bytes.current}),
            (std::array{int64_t{1}, int64_t{1}, int64_t{0}, 40 * kMiB}));
}

TEST(CachingAllocatorModelSettings, ExpandableSegmentsPreferAFreeBlockThatCannotGrow) {
  Model model(Model::kUnlimited, Settings("expandable_segments:True"));
  std::optional<uint64_t> x = model.Allocate(16 * kMiB);  // page 0: [x 16][4 free]
  std::optional<uint64_t> y = model.Allocate(4 * kMiB);   // the free 4 MiB, exactly
  std::optional<uint64_t> z = model.Allocate(6 * kMiB);   // page 1: [z 6][14 free][unmapped...]
  ASSERT_TRUE(x && y && z && model.Free(*x));             // x: a free 16 MiB block between used ones
  // 10 MiB: best fit by size is the 14 MiB tail, but it could grow into the unmapped rest;
  // get_free_block moves on to the 16 MiB block, which cannot grow (16 < 14 + the unmapped rest).
  std::optional<uint64_t> w = model.Allocate(10 * kMiB);
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, *x);
  EXPECT_EQ(model.stats().reserved_bytes.current, 40 * kMiB);
}

TEST(CachingAllocatorModelSettings, ExpandableSegmentsSplitAnyRemainderOf512BytesOrMore) {
  // should_split with expandable segments: 19.5 MiB in a 20 MiB page leaves 512 KiB, split off
  // (without the setting the large pool keeps remainders <= 1 MiB: 20 MiB allocated).
  Model model(Model::kUnlimited, Settings("expandable_segments:True"));
  ASSERT_TRUE(model.Allocate(19 * kMiB + 512 * kKiB));
  EXPECT_EQ(model.stats().allocated_bytes.current, 19 * kMiB + 512 * kKiB);
  EXPECT_EQ(model.stats().reserved_bytes.current, 20 * kMiB);
}

TEST(CachingAllocatorModelSettings, ExpandableSmallPoolGrowsBy2MiBPages) {
  Model model(Model::kUnlimited, Settings("expandable_segments:True"));
  // 1 MiB each, small pool: page 0 holds two, the third maps page 1 (2 MiB), split 1 + 1.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(model.Allocate(kMiB));
  EXPECT_EQ(model.stats().reserved_bytes.current, 4 * kMiB);
  std::vector<ModelSegmentView> segments = model.Segments();
  ASSERT_EQ(segments.size(), 1u);  // without the setting: two 2 MiB segments
  EXPECT_TRUE(segments[0].small_pool);
  EXPECT_EQ(segments[0].size_bytes, 4 * kMiB);
  EXPECT_EQ(segments[0].blocks.size(), 4u);
}

}  // namespace
}  // namespace oomguard
