// The pitfall knobs that act between a net's segments (nn/net.h), and the error for a variant that
// sets one on a net whose source offers no segments.
//
//   std::string error = oomguard::SegmentKnobError(spec.model, spec.pitfalls, net->segments());
//   if (!error.empty()) { ... the variant cannot run: outcome error:error with this message ... }
#pragma once

#include <cstddef>
#include <string>

#include "model/scenario.h"

namespace oomguard {

// Empty when the knobs can run on a net with `segments` segments; else, for the first knob that needs
// segments (checkpoint.segments, inplace.target, retain_grad, keep_intermediates, in that order):
// "model source 'whole' offers no segments, and pitfalls.checkpoint.segments = 2 needs them (...)".
std::string SegmentKnobError(const ModelSpec& model, const PitfallSpec& pitfalls, size_t segments);

}  // namespace oomguard
