#include "workload/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace oomguard {

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerSpec& s, const std::vector<at::Tensor>& params) {
  if (s.kind == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(s.lr).momentum(s.momentum).weight_decay(s.weight_decay));
  }
  if (s.kind == "adam") {
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(s.lr).weight_decay(s.weight_decay));
  }
  if (s.kind == "adamw") {
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(s.lr).weight_decay(s.weight_decay));
  }
  return nullptr;
}

}  // namespace oomguard
