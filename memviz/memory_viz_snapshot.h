// The memory snapshot pytorch.org/memory_viz opens, made from an AllocationTrace's record: the dict
// torch.cuda.memory._snapshot() returns, pickled as torch.cuda.memory._dump_snapshot writes it.
//
//   oomguard::SnapshotSource source{"scenarios/x.json", "x", "pitfall", "cpu", cap_bytes};
//   std::string bytes = oomguard::MemoryVizPickle(oomguard::CpuAccount().trace().Record(), source);
//   WriteFileAtomically("x.pitfall.cpu.pickle", bytes, &error);   // base/atomic_file.h
//   // drag the file onto https://pytorch.org/memory_viz
//
// The dict: {"segments": [...], "device_traces": [[...]], "oomguard": {...}}.
// - device_traces[0] holds each traced event as the caching allocator would log it: an allocation
//   is "segment_alloc" then "alloc", a free "free_requested", "free_completed" then "segment_free",
//   a refusal "oom" with "device_free" (what the cap still allowed). Every entry has addr (not oom),
//   size, stream 0, time_us and frames.
// - segments: one per block live at the snapshot, holding that block ("active_allocated").
// - "oomguard": scenario, variant, backend, cap_bytes, dropped_events (extra; memory_viz ignores it).
//
// Note [One segment per block]: the cpu and meta allocators cache nothing, so what a caching
// allocator would call reserved memory is exactly the live blocks. Giving each block a segment of
// its own size keeps that true in every view: "Active Memory Timeline" draws the blocks, "Active
// Cached Segment Timeline" draws the same picture (reserved == allocated), and "Allocator State
// History" shows one box per tensor with no invented free space. One big segment would have to
// span scattered cpu heap addresses and show the gaps between them as reserved-but-free memory.
//
// Note [Frames]: memory_viz shows an event's frames as its stack, innermost first. There are no
// Python stacks here, so each event gets up to three frames, all in the scenario file at line 0:
// the layer or stage ("the forward of layer 2:linear", when known), the phase ("phase forward"),
// and the variant ("variant pitfall on cpu").
#pragma once

#include <cstdint>
#include <string>

#include "allocators/allocation_trace.h"
#include "memviz/pickle_writer.h"

namespace oomguard {

struct SnapshotSource {
  std::string scenario_file;  // the frames' filename
  std::string scenario;
  std::string variant;
  std::string backend;
  int64_t cap_bytes = 0;
};

PickleValue MemoryVizSnapshot(const TraceRecord& record, const SnapshotSource& source);
std::string MemoryVizPickle(const TraceRecord& record, const SnapshotSource& source);

}  // namespace oomguard
