#include "workload/loop/segment_knobs.h"

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

std::string SegmentKnobError(const ModelSpec& model, const PitfallSpec& pitfalls, const Net& net) {
  const std::string knob = KnobNeedingSegments(pitfalls);
  if (knob.empty()) return "";
  const int64_t segments = static_cast<int64_t>(net.segments());
  if (segments == 0) {
    const std::string why = net.WhyNoSegments();
    return (why.empty() ? "model source '" + model.source + "' offers no segments" : why) + ", and " + knob +
           " needs them (checkpointing and the per-layer knobs act between segments)";
  }
  const std::string has =
      " the model has " + std::to_string(segments) + " segments (0-" + std::to_string(segments - 1) + ")";
  if (pitfalls.checkpoint.segments > segments) {
    return "pitfalls.checkpoint.segments = " + std::to_string(pitfalls.checkpoint.segments) +
           " asks for more checkpointed segments than" + has + ": a checkpointed segment holds at least one";
  }
  if (pitfalls.inplace.target != "none") {
    const int64_t layer = pitfalls.inplace.layer;
    if (layer >= segments) return "pitfalls.inplace.layer = " + std::to_string(layer) + " does not exist:" + has;
    if (pitfalls.inplace.target == "parameter" &&
        net.segment_parameters(static_cast<size_t>(layer), static_cast<size_t>(layer) + 1).empty()) {
      return "pitfalls.inplace.target \"parameter\" needs a segment with parameters; segment " +
             net.segment_name(static_cast<size_t>(layer)) + " has none";
    }
  }
  return "";
}

}  // namespace oomguard
