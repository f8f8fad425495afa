#include "allocators/caching_allocator_model.h"

#include <algorithm>
#include <iterator>

namespace oomguard {
namespace {

// Synthetic segment addresses start high and 2 MiB-aligned, so 0 is never a block's address.
constexpr uint64_t kFirstSegmentAddress = uint64_t{1} << 40;

void Increase(ModelStat& stat, int64_t amount) {
  stat.current += amount;
  stat.peak = std::max(stat.peak, stat.current);
}

void Decrease(ModelStat& stat, int64_t amount) { stat.current -= amount; }

}  // namespace

CachingAllocatorModel::CachingAllocatorModel(int64_t cap_bytes)
    : cap_bytes_(cap_bytes), next_segment_address_(kFirstSegmentAddress) {}

int64_t CachingAllocatorModel::RoundSize(int64_t requested) {
  if (requested < kMinBlockSize) return kMinBlockSize;
  return kMinBlockSize * ((requested + kMinBlockSize - 1) / kMinBlockSize);
}

int64_t CachingAllocatorModel::AllocationSize(int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

std::optional<uint64_t> CachingAllocatorModel::Allocate(int64_t requested) {
  if (requested <= 0) return uint64_t{0};
  const int64_t size = RoundSize(requested);
  const bool small = size <= kSmallSize;
  FreeSet& pool = PoolOf(small);

  std::optional<uint64_t> address;
  // get_free_block: lower_bound on (size, null address) is the best fit, ties by lowest address.
  auto fit = pool.lower_bound({size, 0});
  if (fit != pool.end()) {
    address = fit->second;
    pool.erase(fit);
  } else {
    const int64_t segment_size = AllocationSize(size);
    address = NewSegment(segment_size, small);
    if (!address) {
      // release_cached_blocks always reports success, so the retry is counted even when it fails.
      ReleaseCachedSegments();
      stats_.num_alloc_retries += 1;
      address = NewSegment(segment_size, small);
    }
    if (!address) {
      stats_.num_ooms += 1;
      return std::nullopt;
    }
  }

  Block& block = blocks_.at(*address);
  const int64_t remaining = block.size - size;
  const bool split = small ? remaining >= kMinBlockSize : remaining > kSmallSize;  // should_split
  if (split) {
    Block rest = block;
    rest.size = remaining;
    blocks_.emplace(*address + static_cast<uint64_t>(size), rest);
    pool.insert({remaining, *address + static_cast<uint64_t>(size)});
    block.size = size;
  }
  block.allocated = true;
  block.requested = requested;
  Increase(stats_.allocated_bytes, block.size);
  Increase(stats_.requested_bytes, requested);
  Increase(stats_.allocations, 1);
  return address;
}

bool CachingAllocatorModel::Free(uint64_t address) {
  if (address == 0) return true;
  auto it = blocks_.find(address);
  if (it == blocks_.end() || !it->second.allocated) return false;
  Block& block = it->second;
  Decrease(stats_.allocated_bytes, block.size);
  Decrease(stats_.requested_bytes, block.requested);
  Decrease(stats_.allocations, 1);
  block.allocated = false;
  block.requested = 0;
  const bool small = block.small;
  const uint64_t merged = MergeWithNeighbours(address);
  PoolOf(small).insert({blocks_.at(merged).size, merged});
  return true;
}

uint64_t CachingAllocatorModel::MergeWithNeighbours(uint64_t address) {
  auto it = blocks_.find(address);
  FreeSet& pool = PoolOf(it->second.small);
  // try_merge_blocks(block, block->prev): the merged block starts at the previous one's address.
  if (it->first != it->second.segment) {
    auto prev = std::prev(it);
    if (!prev->second.allocated) {
      pool.erase({prev->second.size, prev->first});
      prev->second.size += it->second.size;
      blocks_.erase(it);
      it = prev;
    }
  }
  // try_merge_blocks(block, block->next)
  const uint64_t end = it->first + static_cast<uint64_t>(it->second.size);
  if (end != it->second.segment + static_cast<uint64_t>(it->second.segment_size)) {
    auto next = std::next(it);
    if (!next->second.allocated) {
      pool.erase({next->second.size, next->first});
      it->second.size += next->second.size;
      blocks_.erase(next);
    }
  }
  return it->first;
}

std::optional<uint64_t> CachingAllocatorModel::NewSegment(int64_t segment_size, bool small) {
  // alloc_block: total_allocated_memory + size > allowed_memory_maximum refuses the segment.
  if (segment_size > cap_bytes_ - stats_.reserved_bytes.current) return std::nullopt;
  const uint64_t address = next_segment_address_;
  next_segment_address_ += static_cast<uint64_t>(segment_size);
  Block block;
  block.size = segment_size;
  block.small = small;
  block.segment = address;
  block.segment_size = segment_size;
  blocks_.emplace(address, block);
  Increase(stats_.reserved_bytes, segment_size);
  Increase(stats_.segments, 1);
  stats_.num_device_alloc += 1;
  return address;
}

void CachingAllocatorModel::ReleaseCachedSegments() {
  // release_cached_blocks: release_blocks(large_blocks) then release_blocks(small_blocks).
  ReleaseWholeSegments(large_free_);
  ReleaseWholeSegments(small_free_);
}

void CachingAllocatorModel::ReleaseWholeSegments(FreeSet& pool) {
  for (auto it = pool.begin(); it != pool.end();) {
    const auto [size, address] = *it;
    const Block& block = blocks_.at(address);
    if (address != block.segment || size != block.segment_size) {  // split: neighbours exist
      ++it;
      continue;
    }
    it = pool.erase(it);
    blocks_.erase(address);
    Decrease(stats_.reserved_bytes, size);
    Decrease(stats_.segments, 1);
    stats_.num_device_free += 1;
  }
}

void CachingAllocatorModel::EmptyCache() { ReleaseCachedSegments(); }

void CachingAllocatorModel::ResetPeaks() {
  for (ModelStat* stat : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.requested_bytes, &stats_.allocations,
                          &stats_.segments}) {
    stat->peak = stat->current;
  }
}

std::vector<ModelSegmentView> CachingAllocatorModel::Segments() const {
  std::vector<ModelSegmentView> segments;
  for (const auto& [address, block] : blocks_) {
    if (address == block.segment) {
      ModelSegmentView segment;
      segment.address = address;
      segment.size_bytes = block.segment_size;
      segment.small_pool = block.small;
      segments.push_back(segment);
    }
    segments.back().blocks.push_back({address, block.size, block.requested, block.allocated});
  }
  return segments;
}

}  // namespace oomguard
