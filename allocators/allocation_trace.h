// AllocationTrace: an opt-in record of one device's allocations, frees and refusals, from which a
// memory_viz snapshot is made (memviz/memory_viz_snapshot.h).
//
//   oomguard::AllocationTrace& trace = oomguard::CpuAccount().trace();
//   trace.Enable();                            // cleared; the allocators record from here on
//   trace.SetLocation("the forward of layer 2:linear");
//   ... tensors come and go; an allocation may be refused ...
//   oomguard::TraceRecord record = trace.Record();  // events, blocks live now, their labels
//   trace.Disable();
//
// The tracking allocators feed it through DeviceAccount::TraceAlloc/TraceFree (device_account.h):
// when the trace is off that costs one relaxed atomic load per allocation and per free.
//
// Note [Bounded trace]: the trace keeps the most recent max_events events (default 100,000) in a
// ring; older ones are dropped and counted (TraceRecord::dropped_events). The blocks live now are
// kept apart from the ring, without a bound, so a snapshot always shows everything allocated while
// tracing and not yet freed, however long the run. memory_viz draws a live block whose alloc event
// was dropped as "allocated before the trace began", which is what it then is.
//
// Note [Frees of untraced blocks]: a free is recorded only when its block was allocated while the
// trace was on; blocks from before have no address on meta, so on both backends the trace holds
// only blocks it saw begin, and every free it records has its block's size.
//
// Thread safety: Record*/SetLocation may be called from any thread (one mutex, taken only while
// enabled); Enable/Disable are for the controlling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace oomguard {

enum class TraceAction : uint8_t { kAlloc, kFree, kOom };

// Where an event happened: the ledger's phase and, when the harness knows it, the layer or stage.
struct TraceLabel {
  std::string phase;     // "forward"
  std::string location;  // "the forward of layer 2:linear"; empty when unknown
};

struct TraceEvent {
  TraceAction action = TraceAction::kAlloc;
  uint64_t address = 0;    // 0 for kOom
  int64_t bytes = 0;       // requested bytes; for kOom the refused request
  int64_t free_bytes = 0;  // kOom only: what the cap still allowed (cap minus live), 0 without a cap
  int32_t label = 0;       // index into TraceRecord::labels
  int64_t time_us = 0;     // microseconds since the Unix epoch
};

struct LiveBlock {
  uint64_t address = 0;
  int64_t bytes = 0;
  int32_t label = 0;  // where it was allocated
};

// A copy of the trace: plain data, for the snapshot writer.
struct TraceRecord {
  std::vector<TraceEvent> events;  // oldest first
  int64_t dropped_events = 0;      // SUM: older events the ring no longer holds (Note [Bounded trace])
  std::vector<LiveBlock> live;     // allocated while tracing and not freed, by address
  std::vector<TraceLabel> labels;
};

class AllocationTrace {
 public:
  static constexpr size_t kDefaultMaxEvents = 100000;

  AllocationTrace() = default;
  AllocationTrace(const AllocationTrace&) = delete;
  AllocationTrace& operator=(const AllocationTrace&) = delete;

  // Clears everything and starts recording; max_events >= 1.
  void Enable(size_t max_events = kDefaultMaxEvents);
  // Stops recording; what was recorded stays readable through Record().
  void Disable();
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // Names the layer or stage that following events belong to; empty: none.
  void SetLocation(std::string_view location);

  void RecordAlloc(uint64_t address, int64_t bytes, std::string_view phase);
  void RecordFree(uint64_t address, int64_t bytes, std::string_view phase);  // Note [Frees of untraced blocks]
  void RecordOom(int64_t requested_bytes, int64_t free_bytes, std::string_view phase);

  // An address for an allocation that has none (meta, Note [Meta context]): a bump pointer that never
  // reuses a range, each block starting 512-byte aligned as CUDA blocks do.
  uint64_t NextSyntheticAddress(int64_t bytes);

  TraceRecord Record() const;

 private:
  void PushLocked(TraceEvent event);
  int32_t LabelLocked(std::string_view phase);

  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;  // guards everything below
  size_t max_events_ = kDefaultMaxEvents;
  std::vector<TraceEvent> ring_;
  size_t next_ = 0;  // where the next event goes once the ring is full
  int64_t dropped_ = 0;
  std::unordered_map<uint64_t, LiveBlock> live_;
  std::vector<TraceLabel> labels_;
  std::map<std::pair<std::string, std::string>, int32_t> label_index_;
  std::string location_;
  uint64_t next_synthetic_ = 0;
};

}  // namespace oomguard
