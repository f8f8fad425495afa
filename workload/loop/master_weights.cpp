#include "workload/loop/master_weights.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace oomguard {
namespace {

// The base's defaults, cloned into each param group; the inner optimizer holds the real options.
struct NoOptions final : torch::optim::OptimizerCloneableOptions<NoOptions> {};

}  // namespace

MasterWeights::MasterWeights(const std::vector<at::Tensor>& stepped, const MakeInner& make_inner,
                             int64_t group_elements)
    // The base holds the 16-bit tensors, so that zero_grad clears the gradients the run fills.
    : torch::optim::Optimizer(stepped, std::make_unique<NoOptions>()), stepped_(stepped) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& t : stepped_) {
    masters_.push_back(t.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true).requires_grad_(true));
  }
  inner_ = make_inner(masters_);
  // stage3.py's _create_fp16_sub_groups: a group closes once it holds group_elements or more, or at the
  // last tensor; 0: one group.
  int64_t in_group = 0;
  for (size_t i = 0; i < stepped_.size(); ++i) {
    in_group += stepped_[i].numel();
    if ((group_elements > 0 && in_group >= group_elements) || i + 1 == stepped_.size()) {
      group_ends_.push_back(i + 1);
      in_group = 0;
    }
  }
}

MasterWeights::MasterWeights(FlatPartition& flat, const MakeInner& make_inner)
    : MasterWeights(std::vector<at::Tensor>{flat.Slice()}, make_inner) {
  flat_ = &flat;
}

// Note [Master weights], master_weights.h: the casts live until the inner step returns.
at::Tensor MasterWeights::step(LossClosure /*closure*/) {
  at::NoGradGuard no_grad;
  if (flat_) {  // stage_1_and_2.py's step(), 1886-1920: the 16-bit copy lives for the cast alone
    flat_->FreeGradientsOutside();
    masters_[0].mutable_grad() = at::flatten_dense_tensors(flat_->Gradients()).to(at::kFloat);
    flat_->FreeGradientsInside();
    inner_->step();
    masters_[0].mutable_grad().reset();
    stepped_[0].copy_(masters_[0]);
    return {};
  }
  size_t begin = 0;
  for (const size_t end : group_ends_) {
    for (size_t i = begin; i < end; ++i) {
      const at::Tensor grad = stepped_[i].grad();
      if (grad.defined()) masters_[i].mutable_grad() = grad.to(at::kFloat);
    }
    inner_->step();  // only the group's masters have gradients: the others are skipped
    for (size_t i = begin; i < end; ++i) {
      if (!masters_[i].grad().defined()) continue;
      masters_[i].mutable_grad().reset();
      stepped_[i].copy_(masters_[i]);
    }
    begin = end;
  }
  return {};
}

int64_t MasterGroupElements(const ParallelSpec& parallel) {
  constexpr int64_t kStage3SubGroupSize = 1'000'000'000;  // DeepSpeed's zero/config.py default
  return parallel.active() && parallel.strategy == "fsdp" ? kStage3SubGroupSize : 0;
}

int64_t MasterWeights::MasterBytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& m : masters_) bytes += static_cast<int64_t>(m.nbytes());
  return bytes;
}

}  // namespace oomguard
