#include "allocators/allocation_trace.h"

#include <algorithm>
#include <chrono>

namespace oomguard {
namespace {

// Synthetic addresses start above 4 GiB so they read like addresses, and stay far below 2^53, where
// memory_viz's JavaScript numbers would lose precision.
constexpr uint64_t kSyntheticBase = uint64_t{1} << 32;
constexpr uint64_t kSyntheticAlignment = 512;

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void AllocationTrace::Enable(size_t max_events) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_events_ = std::max<size_t>(max_events, 1);
  ring_.clear();
  next_ = 0;
  dropped_ = 0;
  live_.clear();
  labels_.clear();
  label_index_.clear();
  location_.clear();
  enabled_.store(true, std::memory_order_relaxed);
}

void AllocationTrace::Disable() { enabled_.store(false, std::memory_order_relaxed); }

void AllocationTrace::SetLocation(std::string_view location) {
  std::lock_guard<std::mutex> lock(mutex_);
  location_.assign(location);
}

void AllocationTrace::RecordAlloc(uint64_t address, int64_t bytes, std::string_view phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int32_t label = LabelLocked(phase);
  live_[address] = LiveBlock{address, bytes, label};
  PushLocked({TraceAction::kAlloc, address, bytes, 0, label, NowMicros()});
}

void AllocationTrace::RecordFree(uint64_t address, int64_t bytes, std::string_view phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (live_.erase(address) == 0) return;  // Note [Frees of untraced blocks]
  PushLocked({TraceAction::kFree, address, bytes, 0, LabelLocked(phase), NowMicros()});
}

void AllocationTrace::RecordOom(int64_t requested_bytes, int64_t free_bytes, std::string_view phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  PushLocked({TraceAction::kOom, 0, requested_bytes, free_bytes, LabelLocked(phase), NowMicros()});
}

uint64_t AllocationTrace::NextSyntheticAddress(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Never reset, not even by Enable: a block from an earlier trace keeps its address until freed.
  const uint64_t address = kSyntheticBase + next_synthetic_;
  const uint64_t span = (static_cast<uint64_t>(std::max<int64_t>(bytes, 1)) + kSyntheticAlignment - 1) /
                        kSyntheticAlignment * kSyntheticAlignment;
  next_synthetic_ += span;
  return address;
}

TraceRecord AllocationTrace::Record() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TraceRecord record;
  record.events.reserve(ring_.size());
  // Once full, the oldest event is the one the next push overwrites.
  const size_t oldest = ring_.size() == max_events_ ? next_ : 0;
  for (size_t i = 0; i < ring_.size(); ++i) record.events.push_back(ring_[(oldest + i) % ring_.size()]);
  record.dropped_events = dropped_;
  for (const auto& [address, block] : live_) record.live.push_back(block);
  std::sort(record.live.begin(), record.live.end(),
            [](const LiveBlock& a, const LiveBlock& b) { return a.address < b.address; });
  record.labels = labels_;
  return record;
}

void AllocationTrace::PushLocked(TraceEvent event) {
  if (ring_.size() < max_events_) {
    ring_.push_back(event);
    return;
  }
  ring_[next_] = event;  // Note [Bounded trace]: overwrite the oldest
  next_ = (next_ + 1) % max_events_;
  ++dropped_;
}

int32_t AllocationTrace::LabelLocked(std::string_view phase) {
  auto key = std::make_pair(std::string(phase), location_);
  const auto found = label_index_.find(key);
  if (found != label_index_.end()) return found->second;
  const auto index = static_cast<int32_t>(labels_.size());
  labels_.push_back({key.first, key.second});
  label_index_.emplace(std::move(key), index);
  return index;
}

}  // namespace oomguard
