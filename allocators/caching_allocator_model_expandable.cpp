// CachingAllocatorModel's expandable segments (expandable_segments:True): one virtual segment per
// pool that gains physical pages (2 MiB small, 20 MiB large) as blocks need them and gives back the
// pages free blocks cover entirely on emptyCache or the OOM retry. Each function copies the one of
// the same name in DeviceCachingAllocator (c10/cuda/CUDACachingAllocator.cpp) and ExpandableSegment.
#include <algorithm>
#include <iterator>

#include "allocators/caching_allocator_model.h"

namespace oomguard {
namespace {

int64_t PageSize(bool small) {
  return small ? CachingAllocatorModel::kSmallBuffer : CachingAllocatorModel::kLargeBuffer;
}

}  // namespace

std::optional<uint64_t> CachingAllocatorModel::NextInSegment(uint64_t address) const {
  const Block& block = blocks_.at(address);
  const uint64_t end = address + static_cast<uint64_t>(block.size);
  if (end == block.segment + static_cast<uint64_t>(block.segment_size)) return std::nullopt;
  return end;
}

int64_t CachingAllocatorModel::ExpandableSize(uint64_t address) const {
  // get_free_block's expandable_size: the block plus the unmapped range right after it.
  const Block& block = blocks_.at(address);
  const std::optional<uint64_t> next = block.expandable ? NextInSegment(address) : std::nullopt;
  if (!next || blocks_.at(*next).mapped) return block.size;
  return block.size + blocks_.at(*next).size;
}

uint64_t CachingAllocatorModel::FindExpandableBlock(int64_t size, bool small) {
  // find_expandable_block: the lowest unmapped range (with the free block just before it) from which
  // free and unmapped blocks add up to `size`; else a new segment, all of it unmapped.
  auto free_at = [this](std::optional<uint64_t> address) { return address && !blocks_.at(*address).allocated; };
  for (uint64_t unmapped : UnmappedOf(small)) {
    uint64_t candidate = unmapped;
    if (unmapped != blocks_.at(unmapped).segment) {
      const uint64_t prev = std::prev(blocks_.find(unmapped))->first;
      if (!blocks_.at(prev).allocated) candidate = prev;
    }
    int64_t bytes = 0;
    for (std::optional<uint64_t> b = candidate; bytes < size && free_at(b); b = NextInSegment(*b)) {
      bytes += blocks_.at(*b).size;
    }
    if (bytes >= size) return candidate;
  }
  const uint64_t address = EmplaceSegment(kExpandableAddressSpace, small);
  Block& segment = blocks_.at(address);
  segment.mapped = false;
  segment.expandable = true;
  UnmappedOf(small).insert(address);
  return address;
}

uint64_t CachingAllocatorModel::TryAllocateExpandableBlock(int64_t size, bool small) {
  // try_allocate_expandable_block: map pages after the candidate until it holds `size`; each
  // mapping merges with the free block before it. The model has no driver to refuse a page.
  uint64_t candidate = FindExpandableBlock(size, small);
  if (!blocks_.at(candidate).mapped) candidate = MapBlock(candidate, std::min(blocks_.at(candidate).size, size));
  while (blocks_.at(candidate).size < size) {
    const uint64_t next = *NextInSegment(candidate);
    candidate = MapBlock(next, std::min(size - blocks_.at(candidate).size, blocks_.at(next).size));
  }
  Unlist(candidate);
  return candidate;
}

uint64_t CachingAllocatorModel::MapBlock(uint64_t address, int64_t size) {
  // map_block: ExpandableSegment::map maps whole pages from the (page-aligned) block's start; the
  // rest of the block stays unmapped. Reserved bytes grow by the pages; no new segment is counted.
  Block& block = blocks_.at(address);
  const int64_t page = PageSize(block.small);
  const int64_t mapped = (size + page - 1) / page * page;
  UnmappedOf(block.small).erase(address);
  block.mapped = true;
  if (mapped < block.size) {
    Block rest = block;
    rest.size = block.size - mapped;
    rest.mapped = false;
    block.size = mapped;
    blocks_.emplace(address + static_cast<uint64_t>(mapped), rest);
    UnmappedOf(rest.small).insert(address + static_cast<uint64_t>(mapped));
  }
  const uint64_t merged = MergeWithNeighbours(address);
  InsertFree(merged);
  stats_.reserved_bytes.Increase(mapped);
  stats_.num_device_alloc += 1;
  return merged;
}

void CachingAllocatorModel::UnmapBlock(uint64_t address) {
  // unmap_block: ExpandableSegment::unmap frees the pages the free block covers entirely; the parts
  // before and after them stay mapped and free.
  const Block block = blocks_.at(address);
  const auto page = static_cast<uint64_t>(PageSize(block.small));
  const uint64_t offset = address - block.segment;
  const uint64_t first_page = (offset + page - 1) / page;
  const uint64_t end_page = (offset + static_cast<uint64_t>(block.size)) / page;
  if (first_page >= end_page) return;
  Unlist(address);
  const uint64_t start = block.segment + first_page * page;
  const auto unmapped = static_cast<int64_t>((end_page - first_page) * page);
  const auto before = static_cast<int64_t>(start - address);
  const int64_t after = block.size - before - unmapped;
  blocks_.erase(address);
  Block piece = block;
  if (before > 0) {
    piece.size = before;
    blocks_.emplace(address, piece);
    InsertFree(address);
  }
  if (after > 0) {
    piece.size = after;
    blocks_.emplace(start + static_cast<uint64_t>(unmapped), piece);
    InsertFree(start + static_cast<uint64_t>(unmapped));
  }
  piece.size = unmapped;
  piece.mapped = false;
  blocks_.emplace(start, piece);
  const uint64_t merged = MergeWithNeighbours(start);
  UnmappedOf(block.small).insert(merged);
  stats_.reserved_bytes.Decrease(unmapped);
  stats_.num_device_free += 1;
  // release_expandable_segment: a segment without pages is given back whole.
  const Block& result = blocks_.at(merged);
  if (result.size == result.segment_size) {
    UnmappedOf(block.small).erase(merged);
    blocks_.erase(merged);
  }
}

}  // namespace oomguard
