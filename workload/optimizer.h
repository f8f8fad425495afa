// The optimizer a scenario's loop names (LoopSpec.optimizer, model/scenario.h), over the net's parameters.
//
//   std::unique_ptr<torch::optim::Optimizer> optimizer = MakeOptimizer(spec.loop.optimizer, params);
#pragma once

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include "model/scenario.h"

namespace oomguard {

// sgd (with momentum and weight decay), adam, adamw; nullptr for a kind the loader does not accept.
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerSpec& spec,
                                                       const std::vector<at::Tensor>& params);

}  // namespace oomguard
