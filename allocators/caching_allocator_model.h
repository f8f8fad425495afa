// CachingAllocatorModel: a plain-C++ simulation of PyTorch's CUDA caching allocator
// (DeviceCachingAllocator in c10/cuda/CUDACachingAllocator.cpp, torch 2.11) for one device and one
// stream, so a cpu or meta run can predict what torch.cuda.memory_stats() would report on a GPU.
//
//   oomguard::CachingAllocatorModel model(/*cap_bytes=*/16 * kGiB);   // cap on *reserved* bytes
//   std::optional<uint64_t> a = model.Allocate(3 << 20);  // 3 MiB: a 20 MiB segment, split
//   if (!a) { /* the real allocator would raise torch.OutOfMemoryError here */ }
//   model.Free(*a);                                       // cached: reserved stays 20 MiB
//   model.EmptyCache();                                   // torch.cuda.empty_cache()
//   CachingAllocatorModel grown(cap, *ParseCachingAllocatorConfig("expandable_segments:True", &e));
//   oomguard::CachingAllocatorModelStats s = model.stats();  // allocated/reserved/requested peaks
//
// Thread safety: none; the caller serialises every call (one mutex around the model).
// Error policy: an allocation the cap refuses returns std::nullopt and counts in num_ooms (the
// caller decides whether that is an error); Free of an address the model did not hand out returns
// false and changes nothing. Nothing throws.
//
// Note [What the model reproduces] (each rule names the function of the real allocator it copies)
// The settings come from a CachingAllocatorConfig (PYTORCH_ALLOC_CONF's syntax); the default is
// PyTorch's with none set.
//   - round_size: requests under 512 bytes become 512 (kMinBlockSize), others round up to a
//     multiple of 512; with roundup_power2_divisions (more than 1 for the size's interval, and the
//     size above 512 * divisions) to the next of `divisions` equal steps between two powers of two
//     (roundup_power2_next_division).
//   - get_pool: a rounded size <= 1 MiB (kSmallSize) goes to the small pool, others to the large.
//   - get_allocation_size: a new segment for a small request is 2 MiB (kSmallBuffer); for a large
//     one under 10 MiB (kMinLargeAlloc) 20 MiB (kLargeBuffer); otherwise the size rounded up to a
//     multiple of 2 MiB (kRoundLarge).
//   - get_free_block: best fit, the first free block of the pool ordered by (size, address)
//     (BlockComparatorSize) whose size >= the rounded size. Oversize rules: a block >= max_split_size
//     never serves a smaller request, and serves a larger one only if it is under the request +
//     max_non_split_rounding_size (20 MiB by default). With expandable segments a free block that
//     could grow into unmapped pages counts as that large, so a later block that cannot grow wins.
//   - malloc: no free block -> garbage_collect_cached_blocks when garbage_collection_threshold is
//     set and there is a cap (set_fraction): above threshold * cap reserved, whole free large-pool
//     segments at least as old as the average (age: get_free_block calls on the pool since the block
//     was cached) are released, round after round, until the excess is reclaimed -> alloc_block (a
//     new segment, refused when reserved + get_allocation_size > the cap, as with set_fraction's
//     allowed_memory_maximum); refused -> release_available_cached_blocks (with max_split_size set:
//     the smallest cached oversize segment that covers the request, else the largest ones until
//     they add up to it; not a retry) -> release_cached_blocks (releases
//     every free block that is a whole segment, large pool first, and always returns true) ->
//     alloc_block again with isRetry, which counts num_alloc_retries whether it then succeeds or
//     not; refused again -> num_ooms += 1 and OutOfMemoryError. A retry that succeeds has still
//     released every fully free segment of both pools.
//   - should_split: small pool (and every pool with expandable segments): remainder >= 512; large
//     pool: remainder > 1 MiB, and never for a request >= max_split_size. An unsplit block
//     is handed out whole, so allocated bytes count the whole block (an 11 MiB request in a 12 MiB
//     segment allocates 12 MiB).
//   - free_block / try_merge_blocks: a freed block merges with its free neighbours in the segment;
//     the segment stays reserved until release_cached_blocks (OOM retry or emptyCache).
//   - Statistics as increase_stat/decrease_stat keep them: allocated_bytes and active_bytes are
//     block sizes, requested_bytes the callers' sizes, reserved_bytes segment sizes; peaks are
//     running maxima that ResetPeaks sets back to the current values (resetPeakStats);
//     oversize_allocations / oversize_segments count blocks and segments >= max_split_size.
//   - Expandable segments (caching_allocator_model_expandable.cpp): one virtual segment per pool;
//     alloc_block maps whole pages (20 MiB large, 2 MiB small) after the lowest free-and-unmapped
//     room that fits (find_expandable_block, try_allocate_expandable_block, map_block: reserved
//     bytes grow by the pages, the segment count does not); release_cached_blocks unmaps the pages
//     free blocks cover whole (unmap_block) and drops a segment left without pages
//     (release_expandable_segment). Segments() shows each mapped range, as snapshot() does.
// Not modelled: several streams or devices (record_stream, events), CUDA graph pools, free-memory
// callbacks (IPC), memory the driver refuses below the cap (cudaMalloc or cuMemCreate), switching
// expandable segments off at run time, and an expandable segment's address space running out
// (PyTorch reserves 9/8 of the card; the model 1 TiB, so one segment per pool). Segment addresses come
// from a bump pointer, so a released range is never handed out again; the real cudaMalloc may reuse
// it, which can change best-fit ties between equally sized blocks (never sizes or statistics).
#pragma once

#include "allocators/caching_allocator_config.h"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace oomguard {

struct ModelStat {
  int64_t current = 0;  // COUNT: now
  int64_t peak = 0;     // COUNT: highest current since construction or ResetPeaks

  // increase_stat / decrease_stat
  void Increase(int64_t amount) {
    current += amount;
    peak = peak > current ? peak : current;
  }
  void Decrease(int64_t amount) { current -= amount; }
};

struct CachingAllocatorModelStats {
  ModelStat allocated_bytes;      // bytes of handed-out blocks (rounded, split or whole)
  ModelStat reserved_bytes;       // bytes of segments held ("cudaMalloc'd")
  ModelStat requested_bytes;      // bytes the callers asked for
  ModelStat allocations;          // handed-out blocks
  ModelStat segments;             // segments held
  int64_t num_alloc_retries = 0;  // SUM: segment allocations retried after releasing the cache
  int64_t num_ooms = 0;           // SUM: requests refused (Allocate returned nullopt)
  int64_t num_device_alloc = 0;   // SUM: segments created (cudaMalloc calls that succeeded)
  int64_t num_device_free = 0;    // SUM: segments released (cudaFree calls)
  ModelStat oversize_allocations;  // handed-out blocks >= max_split_size
  ModelStat oversize_segments;     // segments >= max_split_size
};

// The request the model refused last, as it stood after the release-and-retry (for OOM messages).
struct ModelRefusal {
  int64_t requested_bytes = 0;  // what the caller asked for
  int64_t segment_bytes = 0;    // the segment alloc_block needed (get_allocation_size)
  int64_t reserved_bytes = 0;   // reserved when it was refused, the cache already released
  int64_t allocated_bytes = 0;  // allocated then
};

// One block of a segment, as a snapshot shows it.
struct ModelBlockView {
  uint64_t address = 0;
  int64_t size_bytes = 0;
  int64_t requested_bytes = 0;  // 0 for a free block
  bool allocated = false;
};

// A segment; for an expandable segment, one contiguous mapped range of it, as snapshot() reports.
struct ModelSegmentView {
  uint64_t address = 0;
  int64_t size_bytes = 0;
  bool small_pool = false;
  bool expandable = false;
  std::vector<ModelBlockView> blocks;  // in address order, covering the segment
};

class CachingAllocatorModel {
 public:
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
  static constexpr int64_t kMinBlockSize = 512;
  static constexpr int64_t kSmallSize = 1 << 20;       // 1 MiB
  static constexpr int64_t kSmallBuffer = 2 << 20;     // 2 MiB
  static constexpr int64_t kLargeBuffer = 20 << 20;    // 20 MiB
  static constexpr int64_t kMinLargeAlloc = 10 << 20;  // 10 MiB
  static constexpr int64_t kRoundLarge = 2 << 20;      // 2 MiB
  // An expandable segment's virtual size; PyTorch reserves 9/8 of the card's memory, which the
  // model does not know, so it takes more than any cap: one expandable segment per pool.
  static constexpr int64_t kExpandableAddressSpace = int64_t{1} << 40;  // 1 TiB

  // cap_bytes bounds reserved bytes (segments), like torch.cuda.set_per_process_memory_fraction;
  // config holds the PYTORCH_ALLOC_CONF settings (the default is PyTorch's: none set).
  explicit CachingAllocatorModel(int64_t cap_bytes = kUnlimited, CachingAllocatorConfig config = {});

  // Hands out a block for `requested` bytes and returns its address, or std::nullopt when the cap
  // refuses a new segment even after releasing the cache. A request of 0 bytes returns 0 and
  // changes nothing (the real allocator hands out a null pointer without touching its pools).
  std::optional<uint64_t> Allocate(int64_t requested);
  // Allocate with the cap lifted for this one request, as the cuda backend takes the CUDA libraries'
  // workspaces before it sets its cap (Note [cuBLAS workspaces held from the start]): what a later
  // request needs then meets a model already at or past the cap.
  uint64_t AllocateUncapped(int64_t requested);
  // Returns a block handed out by Allocate to the cache. Free(0) is a no-op that returns true.
  [[nodiscard]] bool Free(uint64_t address);
  // Releases every segment whose blocks are all free (torch.cuda.empty_cache()).
  void EmptyCache();
  void ResetPeaks();

  CachingAllocatorModelStats stats() const { return stats_; }
  // The last request Allocate refused; nullopt while none was.
  const std::optional<ModelRefusal>& last_refusal() const { return last_refusal_; }
  int64_t cap_bytes() const { return cap_bytes_; }
  const CachingAllocatorConfig& config() const { return config_; }
  // Every segment with its blocks, in address order (for tests and snapshots).
  std::vector<ModelSegmentView> Segments() const;

  // The real allocator's size rules (see the Note above), exposed for tests.
  static int64_t RoundSize(int64_t requested, const CachingAllocatorConfig& config = {});
  static int64_t RoundupPower2NextDivision(int64_t size, int64_t divisions);
  static int64_t AllocationSize(int64_t rounded);

 private:
  struct Block {
    int64_t size = 0;
    int64_t requested = 0;
    bool allocated = false;
    bool small = false;
    uint64_t segment = 0;  // the segment's address
    int64_t segment_size = 0;
    int64_t gc_count_base = 0;  // the pool's get_free_block calls when the block was cached
    bool mapped = true;         // false: virtual range of an expandable segment without pages
    bool expandable = false;    // part of an expandable segment
  };
  using FreeSet = std::set<std::pair<int64_t, uint64_t>>;  // (size, address): BlockComparatorSize

  FreeSet& PoolOf(bool small) { return small ? small_free_ : large_free_; }
  std::set<uint64_t>& UnmappedOf(bool small) { return small ? small_unmapped_ : large_unmapped_; }
  int64_t& FreeBlockCallsOf(bool small) { return small ? small_free_calls_ : large_free_calls_; }
  bool GarbageCollectionOn() const;
  std::optional<uint64_t> GetFreeBlock(int64_t size, bool small);
  bool ShouldSplit(const Block& block, int64_t size) const;
  void InsertFree(uint64_t address);
  std::optional<uint64_t> AllocBlock(int64_t size, bool small);
  std::optional<uint64_t> NewSegment(int64_t segment_size, bool small);
  uint64_t EmplaceSegment(int64_t segment_size, bool small);  // one free block, no statistics
  // Expandable segments (the functions of the same names in PyTorch).
  int64_t ExpandableSize(uint64_t address) const;
  uint64_t FindExpandableBlock(int64_t size, bool small);
  uint64_t TryAllocateExpandableBlock(int64_t size, bool small);
  uint64_t MapBlock(uint64_t address, int64_t size);
  void UnmapBlock(uint64_t address);
  std::optional<uint64_t> NextInSegment(uint64_t address) const;
  void Unlist(uint64_t address);
  bool IsWholeSegment(uint64_t address) const;
  void ReleaseSegment(FreeSet::iterator free_block);
  bool ReleaseAvailableCachedBlocks(int64_t size, bool small);
  void GarbageCollectCachedBlocks();
  void ReleaseCachedSegments();
  void ReleaseWholeSegments(FreeSet& pool);
  // Merges the free block at `address` with free neighbours; returns the merged block's address.
  uint64_t MergeWithNeighbours(uint64_t address);

  int64_t cap_bytes_;
  CachingAllocatorConfig config_;
  uint64_t next_segment_address_;
  std::map<uint64_t, Block> blocks_;  // every block, free or not, by address
  FreeSet small_free_;
  FreeSet large_free_;
  std::set<uint64_t> small_unmapped_;  // BlockPool::unmapped: unmapped blocks by address
  std::set<uint64_t> large_unmapped_;
  int64_t small_free_calls_ = 0;  // BlockPool::get_free_blocks_call_count, the garbage collector's clock
  int64_t large_free_calls_ = 0;
  CachingAllocatorModelStats stats_;
  std::optional<ModelRefusal> last_refusal_;
};

}  // namespace oomguard
