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

class FlatPartition;

// sgd (with momentum and weight decay), adam, adamw; nullptr for a kind the loader does not accept.
// With spec.master_weights, that optimizer over float32 masters of `params`, allocated now, stepping
// them in groups of `master_group_elements` (Note [Master weights], workload/loop/master_weights.h).
// With `flat` (a zero rank's flat partition), the master steps it in place of `params`.
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerSpec& spec, const std::vector<at::Tensor>& params,
                                                       int64_t master_group_elements = 0,
                                                       FlatPartition* flat = nullptr);

// The optimizer state made with the optimizer, before any step: the master copies; 0 for the others,
// whose state comes with the first step.
int64_t StateBytesBeforeTheFirstStep(torch::optim::Optimizer& optimizer);

// The bytes of the tensors in an optimizer's state, for the kinds LibTorch ships that keep tensors
// (sgd, adam, adamw, rmsprop, adagrad), master copies included; nullopt for another kind.
std::optional<int64_t> OptimizerStateBytes(torch::optim::Optimizer& optimizer);

}  // namespace oomguard
