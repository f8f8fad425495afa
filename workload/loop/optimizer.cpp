#include "workload/loop/optimizer.h"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "workload/loop/master_weights.h"

namespace oomguard {
namespace {

int64_t Bytes(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

std::unique_ptr<torch::optim::Optimizer> MakeStepping(const OptimizerSpec& s, const std::vector<at::Tensor>& params) {
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

}  // namespace

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerSpec& s, const std::vector<at::Tensor>& params,
                                                       int64_t master_group_elements, FlatPartition* flat) {
  if (!s.master_weights || s.kind == "none") return MakeStepping(s, params);
  const MasterWeights::MakeInner inner = [&s](const std::vector<at::Tensor>& masters) {
    return MakeStepping(s, masters);
  };
  if (flat) return std::make_unique<MasterWeights>(*flat, inner);
  return std::make_unique<MasterWeights>(params, inner, master_group_elements);
}

int64_t StateBytesBeforeTheFirstStep(torch::optim::Optimizer& optimizer) {
  const auto* master = dynamic_cast<const MasterWeights*>(&optimizer);
  return master ? master->MasterBytes() : 0;
}

// The bytes of the tensors in an optimizer's state, for the kinds LibTorch ships that keep tensors;
// nullopt for another kind (the caller falls back to what its step left live).
std::optional<int64_t> OptimizerStateBytes(torch::optim::Optimizer& optimizer) {
  if (auto* master = dynamic_cast<MasterWeights*>(&optimizer)) {
    const std::optional<int64_t> inner = OptimizerStateBytes(master->inner());
    return inner ? std::optional(*inner + master->MasterBytes()) : std::nullopt;
  }
  int64_t total = 0;
  for (const auto& [key, state] : optimizer.state()) {
    const torch::optim::OptimizerParamState* s = state.get();
    if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(s)) {
      total += Bytes(adam->exp_avg()) + Bytes(adam->exp_avg_sq()) + Bytes(adam->max_exp_avg_sq());
    } else if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(s)) {
      total += Bytes(adamw->exp_avg()) + Bytes(adamw->exp_avg_sq()) + Bytes(adamw->max_exp_avg_sq());
    } else if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(s)) {
      total += Bytes(sgd->momentum_buffer());
    } else if (const auto* rms = dynamic_cast<const torch::optim::RMSpropParamState*>(s)) {
      total += Bytes(rms->square_avg()) + Bytes(rms->momentum_buffer()) + Bytes(rms->grad_avg());
    } else if (const auto* adagrad = dynamic_cast<const torch::optim::AdagradParamState*>(s)) {
      total += Bytes(adagrad->sum());
    } else {
      return std::nullopt;
    }
  }
  return total;
}

}  // namespace oomguard
