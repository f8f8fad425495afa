#include "workload/segment_knobs.h"

namespace oomguard {
namespace {

// The first knob that needs segments, as the scenario sets it; empty when none is set.
std::string KnobNeedingSegments(const PitfallSpec& p) {
  if (p.checkpoint.segments > 0) return "pitfalls.checkpoint.segments = " + std::to_string(p.checkpoint.segments);
  if (p.inplace.target != "none") return "pitfalls.inplace.target = \"" + p.inplace.target + "\"";
  if (p.retain_grad) return "pitfalls.retain_grad = true";
  if (p.keep_intermediates) return "pitfalls.keep_intermediates = true";
  return "";
}

}  // namespace

std::string SegmentKnobError(const ModelSpec& model, const PitfallSpec& pitfalls, size_t segments) {
  const std::string knob = KnobNeedingSegments(pitfalls);
  if (segments > 0 || knob.empty()) return "";
  return "model source '" + model.source + "' offers no segments, and " + knob +
         " needs them (checkpointing and the per-layer knobs act between segments)";
}

}  // namespace oomguard
