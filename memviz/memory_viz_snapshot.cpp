#include "memviz/memory_viz_snapshot.h"

#include <memory>
#include <vector>

namespace oomguard {
namespace {

using Dict = PickleValue::Dict;
using List = PickleValue::List;

constexpr int64_t kLargeSegmentBytes = int64_t{1} << 20;  // the caching allocator's "large" pool: > 1 MiB

PickleValue Frame(const std::string& file, const std::string& name) {
  return Dict{{"filename", file}, {"line", 0}, {"name", name}};
}

// Note [Frames]: one frame list per label, shared by every event that has it.
std::vector<PickleValue> FramesByLabel(const TraceRecord& record, const SnapshotSource& source) {
  std::vector<PickleValue> frames;
  const std::string variant = "variant " + source.variant + " on " + source.backend;
  for (const TraceLabel& label : record.labels) {
    List list;
    if (!label.location.empty()) list.push_back(Frame(source.scenario_file, label.location));
    list.push_back(Frame(source.scenario_file, "phase " + label.phase));
    list.push_back(Frame(source.scenario_file, variant));
    frames.emplace_back(std::make_shared<const PickleValue>(std::move(list)));  // written once, then referenced
  }
  return frames;
}

PickleValue Entry(const char* action, const TraceEvent& e, const PickleValue& frames) {
  Dict d{{"action", action}};
  if (e.action == TraceAction::kOom) {
    d.emplace_back("device_free", e.free_bytes);
  } else {
    d.emplace_back("addr", static_cast<int64_t>(e.address));
  }
  d.emplace_back("size", e.bytes);
  d.emplace_back("stream", 0);
  d.emplace_back("time_us", e.time_us);
  d.emplace_back("frames", frames);
  return d;
}

// Each event as the caching allocator would log it (Note [One segment per block]).
List DeviceTrace(const TraceRecord& record, const std::vector<PickleValue>& frames) {
  List trace;
  for (const TraceEvent& e : record.events) {
    const PickleValue& f = frames.at(static_cast<size_t>(e.label));
    switch (e.action) {
      case TraceAction::kAlloc:
        trace.push_back(Entry("segment_alloc", e, f));
        trace.push_back(Entry("alloc", e, f));
        break;
      case TraceAction::kFree:
        trace.push_back(Entry("free_requested", e, f));
        trace.push_back(Entry("free_completed", e, f));
        trace.push_back(Entry("segment_free", e, f));
        break;
      case TraceAction::kOom:
        trace.push_back(Entry("oom", e, f));
        break;
    }
  }
  return trace;
}

PickleValue Segment(const LiveBlock& block, const PickleValue& frames) {
  const auto address = static_cast<int64_t>(block.address);
  Dict b{{"address", address},
         {"size", block.bytes},
         {"requested_size", block.bytes},
         {"state", "active_allocated"},
         {"frames", frames}};
  return Dict{{"device", 0},
              {"address", address},
              {"total_size", block.bytes},
              {"allocated_size", block.bytes},
              {"active_size", block.bytes},
              {"requested_size", block.bytes},
              {"stream", 0},
              {"segment_type", block.bytes > kLargeSegmentBytes ? "large" : "small"},
              {"is_expandable", false},
              {"frames", frames},
              {"blocks", List{std::move(b)}}};
}

}  // namespace

PickleValue MemoryVizSnapshot(const TraceRecord& record, const SnapshotSource& source) {
  const std::vector<PickleValue> frames = FramesByLabel(record, source);
  List segments;
  for (const LiveBlock& block : record.live)
    segments.push_back(Segment(block, frames.at(static_cast<size_t>(block.label))));
  Dict about{{"scenario", source.scenario},
             {"variant", source.variant},
             {"backend", source.backend},
             {"cap_bytes", source.cap_bytes},
             {"dropped_events", record.dropped_events}};
  return Dict{{"segments", std::move(segments)},
              {"device_traces", List{DeviceTrace(record, frames)}},
              {"oomguard", std::move(about)}};
}

std::string MemoryVizPickle(const TraceRecord& record, const SnapshotSource& source) {
  return Pickle(MemoryVizSnapshot(record, source));
}

}  // namespace oomguard
