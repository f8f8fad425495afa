// The optimizer a scenario's loop names (LoopSpec.optimizer, model/scenario.h), over the net's parameters,
// and the bytes any LibTorch optimizer's state holds (a registered workload's, user_workload_run.cpp).
//
//   std::unique_ptr<torch::optim::Optimizer> optimizer = MakeOptimizer(spec.loop.optimizer, params);
#pragma once

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "model/scenario.h"

namespace oomguard {

// sgd (with momentum and weight decay), adam, adamw; nullptr for a kind the loader does not accept.
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerSpec& spec,
                                                       const std::vector<at::Tensor>& params);

// The bytes of the tensors in an optimizer's state, for the kinds LibTorch ships that keep tensors
// (sgd, adam, adamw, rmsprop, adagrad); nullopt for another kind.
std::optional<int64_t> OptimizerStateBytes(torch::optim::Optimizer& optimizer);

}  // namespace oomguard
