// The catalog loop's forward pass with scenario.h's PitfallSpec knobs: in-place edits, retain_grad and
// kept intermediates, checkpoint segments, the host-to-device copy inside the first segment, and a
// rank's hooks around each segment. It books what each layer's forward left live, for an OOM report.
// VariantRun (variant_run.cpp) makes one once its model and rank strategy exist.
//
//   PitfallForward forward(spec, ledger, *net, parallel.get(), batches);
//   at::Tensor out = forward.Forward(batch, /*training=*/true, &intermediates);
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "allocators/ledger.h"
#include "model/scenario.h"
#include "nn/net.h"
#include "workload/loop/batch_maker.h"
#include "workload/parallel/rank_strategy.h"

namespace oomguard {

class PitfallForward {
 public:
  // All must outlive this (and the backward of its last forward); parallel may be null (no `parallel`).
  PitfallForward(const VariantSpec& spec, Ledger& ledger, Net& net, RankStrategy* parallel, BatchMaker& batches)
      : spec_(spec), ledger_(ledger), net_(net), parallel_(parallel), batches_(batches) {}
  // Its segment hooks point at it (Note [The segment hook outlives the forward], pitfall_forward.cpp).
  PitfallForward(const PitfallForward&) = delete;
  PitfallForward& operator=(const PitfallForward&) = delete;

  // A net without segments runs whole (the loop refused the knobs that need segments). intermediates
  // (null when not training) receives the outputs retain_grad or keep_intermediates keep.
  at::Tensor Forward(const Batch& batch, bool training, std::vector<at::Tensor>* intermediates);

  // What each layer of the last forward left live, by segment name.
  const std::vector<std::pair<std::string, int64_t>>& layer_bytes() const { return layer_bytes_; }
  // After backward that is freed (or kept by a graph, which the activations category still counts).
  void ClearLayerBytes() { layer_bytes_.clear(); }

 private:
  at::Tensor ApplyInplaceKnob(const at::Tensor& out) const;

  const VariantSpec& spec_;
  Ledger& ledger_;
  Net& net_;
  RankStrategy* parallel_;  // may be null
  BatchMaker& batches_;
  std::vector<std::pair<std::string, int64_t>> layer_bytes_;
};

}  // namespace oomguard
