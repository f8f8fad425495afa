// Where autograd's engine itself runs on this thread, between its nodes' functions: there it sums
// two gradient contributions, in place on cpu and, left alone, out of place on meta (Note [Gradient
// sums on meta], kernels/meta_kernels_promote.cpp). A meta session watches its backward nodes:
//
//   EngineSumWatch watch;        // for the session's lifetime
//   ... in a Meta kernel:  if (EngineRunsBetweenNodes()) { the engine's InputBuffer is calling }
#pragma once

#include "ops/op_stream.h"

namespace oomguard {

// Counts, per thread, the autograd nodes whose function is running and, for each graph task (a
// backward, or one a node starts inside itself, as a reentrant checkpoint does), how many were open
// when its first node started.
class EngineSumWatch : public OpObserver {
 public:
  EngineSumWatch();
  void OnBackwardNode(const at::RecordFunction&) override;
  void OnBackwardNodeEnd(const at::RecordFunction&) override;

 private:
  OpSubscription subscription_;
};

// True when a graph task is running on this thread, none of its nodes' functions is (its engine is
// between them: routing a node's outputs into the next nodes' input buffers), and an EngineSumWatch
// has watched it from its first node.
bool EngineRunsBetweenNodes();

}  // namespace oomguard
