#include "allocators/caching_allocator_model.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <utility>

namespace oomguard {
namespace {

// Synthetic segment addresses start high and 2 MiB-aligned, so 0 is never a block's address.
constexpr uint64_t kFirstSegmentAddress = uint64_t{1} << 40;

}  // namespace

CachingAllocatorModel::CachingAllocatorModel(int64_t cap_bytes, CachingAllocatorConfig config)
    : cap_bytes_(cap_bytes), config_(std::move(config)), next_segment_address_(kFirstSegmentAddress) {}

int64_t CachingAllocatorModel::RoundSize(int64_t requested, const CachingAllocatorConfig& config) {
  if (requested < kMinBlockSize) return kMinBlockSize;
  // round_size: 1 division (or 0) means no power-of-two rounding, as does a size that is not above
  // 512 * divisions (its division would be under 512 bytes).
  const int64_t divisions = config.RoundupPower2Divisions(requested);
  if (divisions > 1 && requested > kMinBlockSize * divisions) return RoundupPower2NextDivision(requested, divisions);
  return kMinBlockSize * ((requested + kMinBlockSize - 1) / kMinBlockSize);
}

int64_t CachingAllocatorModel::RoundupPower2NextDivision(int64_t size, int64_t divisions) {
  // roundup_power2_next_division: [2^k, 2^(k+1)) is cut into `divisions` equal steps; round up to one.
  const auto value = static_cast<uint64_t>(size);
  if (std::has_single_bit(value)) return size;
  const uint64_t floor = std::bit_floor(value);
  const uint64_t step = floor >> (std::bit_width(static_cast<uint64_t>(divisions)) - 1);
  if (step == 0) return static_cast<int64_t>(floor << 1);
  const uint64_t rounded_down = value & ~(step - 1);
  return static_cast<int64_t>(rounded_down == value ? value : rounded_down + step);
}

int64_t CachingAllocatorModel::AllocationSize(int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

uint64_t CachingAllocatorModel::AllocateUncapped(int64_t requested) {
  const int64_t cap = std::exchange(cap_bytes_, kUnlimited);
  const std::optional<uint64_t> block = Allocate(requested);
  cap_bytes_ = cap;
  return block.value();  // nothing refuses an uncapped request
}

std::optional<uint64_t> CachingAllocatorModel::Allocate(int64_t requested) {
  if (requested <= 0) return uint64_t{0};
  const int64_t size = RoundSize(requested, config_);
  const bool small = size <= kSmallSize;

  std::optional<uint64_t> address = GetFreeBlock(size, small);
  if (!address) {
    // malloc: garbage collection first (only under a cap, set_fraction), then alloc_block, then
    // release_available_cached_blocks and alloc_block again, then the retry after releasing all.
    if (GarbageCollectionOn()) GarbageCollectCachedBlocks();
    address = AllocBlock(size, small);
    if (!address && ReleaseAvailableCachedBlocks(size, small)) address = AllocBlock(size, small);
    if (!address) {
      // release_cached_blocks always reports success, so the retry is counted even when it fails.
      ReleaseCachedSegments();
      stats_.num_alloc_retries += 1;
      address = AllocBlock(size, small);
    }
    if (!address) {
      stats_.num_ooms += 1;
      last_refusal_ = ModelRefusal{requested, AllocationSize(size), stats_.reserved_bytes.current,
                                   stats_.allocated_bytes.current};
      return std::nullopt;
    }
  }

  Block& block = blocks_.at(*address);
  if (ShouldSplit(block, size)) {
    Block rest = block;
    rest.size = block.size - size;
    block.size = size;
    blocks_.emplace(*address + static_cast<uint64_t>(size), rest);
    InsertFree(*address + static_cast<uint64_t>(size));
  }
  block.allocated = true;
  block.requested = requested;
  stats_.allocated_bytes.Increase(block.size);
  stats_.requested_bytes.Increase(requested);
  stats_.allocations.Increase(1);
  if (block.size >= config_.max_split_size) stats_.oversize_allocations.Increase(1);
  return address;
}

bool CachingAllocatorModel::GarbageCollectionOn() const {
  return cap_bytes_ != kUnlimited && config_.garbage_collection_threshold > 0.0;
}

std::optional<uint64_t> CachingAllocatorModel::GetFreeBlock(int64_t size, bool small) {
  FreeSet& pool = PoolOf(small);
  if (GarbageCollectionOn()) FreeBlockCallsOf(small) += 1;  // ages every cached block of the pool
  // get_free_block: lower_bound on (size, null address) is the best fit, ties by lowest address.
  auto fit = pool.lower_bound({size, 0});
  if (fit == pool.end()) return std::nullopt;
  // The free end of an expandable segment counts as the size it could grow to, so a later block
  // whose growable size is smaller is the better fit.
  for (auto next = std::next(fit);
       blocks_.at(fit->second).expandable && next != pool.end() && ExpandableSize(next->second) < ExpandableSize(fit->second);
       ++next) {
    fit = next;
  }
  // An oversize block (>= max_split_size) never serves a smaller request, and serves a large one
  // only when it wastes less than max_non_split_rounding_size.
  if (size < config_.max_split_size && fit->first >= config_.max_split_size) return std::nullopt;
  if (size >= config_.max_split_size && fit->first >= size + config_.max_non_split_rounding_size) {
    return std::nullopt;
  }
  const uint64_t address = fit->second;
  pool.erase(fit);
  return address;
}

bool CachingAllocatorModel::ShouldSplit(const Block& block, int64_t size) const {
  // should_split: the large pool keeps a remainder of 1 MiB or less, and never splits for a request
  // of max_split_size or more; with expandable segments every pool splits as the small one does.
  const int64_t remaining = block.size - size;
  if (block.small || config_.expandable_segments) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

void CachingAllocatorModel::InsertFree(uint64_t address) {
  // BlockPool::insert_into_blocks: the block's age counts from now.
  Block& block = blocks_.at(address);
  block.gc_count_base = FreeBlockCallsOf(block.small);
  PoolOf(block.small).insert({block.size, address});
}

bool CachingAllocatorModel::Free(uint64_t address) {
  if (address == 0) return true;
  auto it = blocks_.find(address);
  if (it == blocks_.end() || !it->second.allocated) return false;
  Block& block = it->second;
  stats_.allocated_bytes.Decrease(block.size);
  stats_.requested_bytes.Decrease(block.requested);
  stats_.allocations.Decrease(1);
  block.allocated = false;
  block.requested = 0;
  if (block.size >= config_.max_split_size) stats_.oversize_allocations.Decrease(1);
  InsertFree(MergeWithNeighbours(address));
  return true;
}

void CachingAllocatorModel::Unlist(uint64_t address) {
  const Block& block = blocks_.at(address);
  if (block.mapped) {
    PoolOf(block.small).erase({block.size, address});
  } else {
    UnmappedOf(block.small).erase(address);
  }
}

uint64_t CachingAllocatorModel::MergeWithNeighbours(uint64_t address) {
  auto it = blocks_.find(address);
  // try_merge_blocks: only a free neighbour that is mapped as the block is (or unmapped as it is).
  auto mergeable = [&it](const Block& other) { return !other.allocated && other.mapped == it->second.mapped; };
  // try_merge_blocks(block, block->prev): the merged block starts at the previous one's address.
  if (it->first != it->second.segment) {
    auto prev = std::prev(it);
    if (mergeable(prev->second)) {
      Unlist(prev->first);
      prev->second.size += it->second.size;
      blocks_.erase(it);
      it = prev;
    }
  }
  // try_merge_blocks(block, block->next)
  const uint64_t end = it->first + static_cast<uint64_t>(it->second.size);
  if (end != it->second.segment + static_cast<uint64_t>(it->second.segment_size)) {
    auto next = std::next(it);
    if (mergeable(next->second)) {
      Unlist(next->first);
      it->second.size += next->second.size;
      blocks_.erase(next);
    }
  }
  return it->first;
}

std::optional<uint64_t> CachingAllocatorModel::AllocBlock(int64_t size, bool small) {
  // alloc_block: total_allocated_memory + get_allocation_size(size) > allowed_memory_maximum refuses,
  // also with expandable segments, which then map whole pages for `size` (possibly past the cap).
  const int64_t segment_size = AllocationSize(size);
  if (segment_size > cap_bytes_ - stats_.reserved_bytes.current) return std::nullopt;
  if (config_.expandable_segments) return TryAllocateExpandableBlock(size, small);
  return NewSegment(segment_size, small);
}

uint64_t CachingAllocatorModel::EmplaceSegment(int64_t segment_size, bool small) {
  const uint64_t address = next_segment_address_;
  next_segment_address_ += static_cast<uint64_t>(segment_size);
  Block block;
  block.size = segment_size;
  block.small = small;
  block.segment = address;
  block.segment_size = segment_size;
  blocks_.emplace(address, block);
  return address;
}

std::optional<uint64_t> CachingAllocatorModel::NewSegment(int64_t segment_size, bool small) {
  const uint64_t address = EmplaceSegment(segment_size, small);
  stats_.reserved_bytes.Increase(segment_size);
  stats_.segments.Increase(1);
  if (segment_size >= config_.max_split_size) stats_.oversize_segments.Increase(1);
  stats_.num_device_alloc += 1;
  return address;
}

bool CachingAllocatorModel::IsWholeSegment(uint64_t address) const {
  const Block& block = blocks_.at(address);
  return address == block.segment && block.size == block.segment_size;
}

void CachingAllocatorModel::ReleaseSegment(FreeSet::iterator free_block) {
  // release_block: cudaFree of a free block that is a whole segment.
  const auto [size, address] = *free_block;
  PoolOf(blocks_.at(address).small).erase(free_block);
  blocks_.erase(address);
  stats_.reserved_bytes.Decrease(size);
  stats_.segments.Decrease(1);
  if (size >= config_.max_split_size) stats_.oversize_segments.Decrease(1);
  stats_.num_device_free += 1;
}

bool CachingAllocatorModel::ReleaseAvailableCachedBlocks(int64_t size, bool small) {
  // release_available_cached_blocks: free the smallest cached oversize block that covers the
  // request (at least max_split_size), else the largest oversize blocks, largest first, until they
  // add up to it. Blocks it released stay released even when they do not add up (returns false).
  if (config_.max_split_size == CachingAllocatorConfig::kNoMaxSplit) return false;
  FreeSet& pool = PoolOf(small);
  const int64_t key = std::max(size, config_.max_split_size);
  auto it = pool.lower_bound({key, 0});
  // A free block of max_split_size or more is never part of a split segment (should_split does not
  // split for such requests, and get_free_block does not hand such blocks to smaller ones), unless
  // it is in an expandable segment, which this function skips.
  if (it != pool.end() && !blocks_.at(it->second).expandable) {
    if (IsWholeSegment(it->second)) ReleaseSegment(it);
    return true;
  }
  if (it == pool.begin()) return false;
  int64_t released = 0;
  --it;
  while (released < key && it->first >= config_.max_split_size) {
    const auto current = it;
    const bool first = current == pool.begin();
    if (!first) --it;
    if (IsWholeSegment(current->second)) {
      released += current->first;
      ReleaseSegment(current);
    }
    if (first) break;
  }
  return released >= key;
}

void CachingAllocatorModel::GarbageCollectCachedBlocks() {
  // garbage_collect_cached_blocks: once reserved bytes pass threshold * cap, release whole free
  // large-pool segments at least as old as the average (age: get_free_block calls on the pool since
  // the block was cached), round after round, until the excess is reclaimed or nothing is old enough.
  const auto threshold = static_cast<int64_t>(config_.garbage_collection_threshold * static_cast<double>(cap_bytes_));
  const int64_t reserved = stats_.reserved_bytes.current;
  if (reserved <= threshold) return;
  const int64_t target = reserved - threshold;
  auto age = [this](uint64_t address) { return large_free_calls_ - blocks_.at(address).gc_count_base; };
  int64_t total_age = 0;
  int64_t freeable = 0;
  for (const auto& [size, address] : large_free_) {
    if (!IsWholeSegment(address)) continue;
    total_age += age(address);
    freeable += 1;
  }
  int64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    // Not stopping at the target on purpose, as PyTorch: fewer collections later.
    for (auto it = large_free_.begin(); it != large_free_.end();) {
      const auto current = it++;
      if (!IsWholeSegment(current->second) || static_cast<double>(age(current->second)) < age_threshold) continue;
      freed = true;
      reclaimed += current->first;
      total_age -= age(current->second);
      freeable -= 1;
      ReleaseSegment(current);
    }
  }
}

void CachingAllocatorModel::ReleaseCachedSegments() {
  // release_cached_blocks: release_blocks(large_blocks) then release_blocks(small_blocks).
  ReleaseWholeSegments(large_free_);
  ReleaseWholeSegments(small_free_);
}

void CachingAllocatorModel::ReleaseWholeSegments(FreeSet& pool) {
  // release_blocks: whole segments are freed; free blocks of expandable segments give back the pages
  // they cover entirely, and a segment left without pages goes (release_expandable_segment).
  std::vector<uint64_t> to_unmap;
  for (auto it = pool.begin(); it != pool.end();) {
    const auto current = it++;
    if (blocks_.at(current->second).expandable) {
      to_unmap.push_back(current->second);
    } else if (IsWholeSegment(current->second)) {  // split blocks have neighbours
      ReleaseSegment(current);
    }
  }
  for (uint64_t address : to_unmap) UnmapBlock(address);
}

void CachingAllocatorModel::EmptyCache() { ReleaseCachedSegments(); }

void CachingAllocatorModel::ResetPeaks() {
  for (ModelStat* stat : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.requested_bytes, &stats_.allocations,
                          &stats_.segments, &stats_.oversize_allocations, &stats_.oversize_segments}) {
    stat->peak = stat->current;
  }
}

std::vector<ModelSegmentView> CachingAllocatorModel::Segments() const {
  std::vector<ModelSegmentView> segments;
  bool after_unmapped = false;
  for (const auto& [address, block] : blocks_) {
    if (!block.mapped) {
      after_unmapped = true;  // the next mapped block starts a new range
      continue;
    }
    if (address == block.segment || after_unmapped) {
      ModelSegmentView segment;
      segment.address = address;
      segment.small_pool = block.small;
      segment.expandable = block.expandable;
      segments.push_back(segment);
    }
    after_unmapped = false;
    segments.back().size_bytes += block.size;
    segments.back().blocks.push_back({address, block.size, block.requested, block.allocated});
  }
  return segments;
}

}  // namespace oomguard
