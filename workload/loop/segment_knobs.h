// The pitfall knobs that act between a net's segments (nn/net.h), and the error for a variant that
// sets one the net cannot take: a net without segments, or a segment index or count past its end.
//
//   std::string error = oomguard::SegmentKnobError(spec.model, spec.pitfalls, *net);
//   if (!error.empty()) { ... the variant cannot run: outcome error:error with this message ... }
#pragma once

#include <string>

#include "model/scenario.h"
#include "nn/net.h"

namespace oomguard {

// Empty when the knobs can run on `net`; else, for the first knob that needs segments
// (checkpoint.segments, inplace.target, retain_grad, keep_intermediates, in that order):
// "model source 'whole' offers no segments, and pitfalls.checkpoint.segments = 2 needs them (...)",
// with the net's own reason (Net::WhyNoSegments) in place of the first clause where it gives one.
// The layer list's indices were checked by the loader; a module's are checked here.
std::string SegmentKnobError(const ModelSpec& model, const PitfallSpec& pitfalls, const Net& net);

}  // namespace oomguard
