// Mixed-precision training's optimizer (loop.optimizer.master_weights): the model's parameters and
// gradients stay bfloat16 or float16, the optimizer steps a float32 master copy of them with float32
// state, and the step's result is copied back into the model's dtype. MakeOptimizer makes it
// (workload/loop/optimizer.h) over what the run steps: the parameters, or a rank's pieces or shards of them.
//
//   MasterWeights opt(stepped, [&](const std::vector<at::Tensor>& masters) { return Adam(masters); });
//   opt.step();                   // grads cast to float32, the masters stepped, copied back, casts freed
//
// Note [Master weights]
// The recipe of the ZeRO paper (K = 12: a float32 parameter, momentum and variance, 4 + 4 + 4 bytes
// per parameter on top of the 16-bit parameter and gradient, 2 + 2), as DeepSpeed's ZeRO stage 1 and 2
// optimizer runs it for bf16/fp16 (deepspeed/runtime/zero/stage_1_and_2.py at edaa722, its lines):
// * Made with the optimizer, before the first forward (its __init__, 489-516): the rank's partition is
//   cloned to float32 (`weights_partition = ...detach().clone().to(dtype=master_weights_and_grads_dtype)`,
//   kept in single_partition_of_fp32_groups) and the inner optimizer's param group is the master
//   (`param_group['params'] = [self.single_partition_of_fp32_groups[i]]`). Here: one float32 master
//   per stepped tensor, 4 bytes an element, counted as optimizer state from setup on.
// * step() (2357-2386): each stepped tensor's gradient is cast to float32 (`single_grad_partition =
//   flat_grad_partition.to(self.single_partition_of_fp32_groups[i].dtype)`) and becomes the master's
//   gradient; the inner optimizer steps the masters (`_optimizer_step`, its state float32: Adam's
//   exp_avg and exp_avg_sq, 8 bytes an element, allocated at the first step as LibTorch allocates
//   them); the float32 gradients are freed (`self.single_partition_of_fp32_groups[i].grad = None`), and
//   each master is copied into its 16-bit tensor (`bit16_partitions[partition_id].data.copy_(
//   fp32_partition.data)`). The transient is those float32 gradients, 4 bytes per stepped element, all
//   live from the first cast until the inner step returns (DeepSpeed's one fp32 gradient partition).
// * fsdp steps in sub-groups as DeepSpeed's stage 3 does (stage3.py, same commit: _create_fp16_sub_groups,
//   1160-1183, a group closed once it holds sub_group_size elements, 1e9 by default in
//   zero/config.py; _prepare_fp32_grad_for_sub_group, 2398-2416, and _release_sub_group, 2448-2452):
//   each group's gradients are cast, its masters stepped, the casts freed, before the next group's. The
//   transient is one group's float32 gradients (about 4 GB on a rank of the 70B), not the whole shard's.
// So a rank holds 12 bytes of optimizer state per element it steps: every parameter (no parallel,
// ddp), its slice (zero1, zero2) or its shards (fsdp), the ZeRO paper's 12 / N.
// Differs from DeepSpeed: its master is one flat partition of padded / world elements, the padding
// included (the last rank's up to 2 x world - 1 elements, 12 bytes each); here the masters are the
// pieces the optimizer steps, parameters only (Note [One simulated rank], workload/parallel/data_parallel.h).
// DeepSpeed flattens the partition's 16-bit gradients (a copy, 2 bytes an element) before the cast and
// frees them and it before stepping (free_grad_in_param_list); here each gradient is cast where it is,
// and the 16-bit gradients live through the step, as without master weights.
// fsdp: DeepSpeed's stage 3 keeps the same float32 partition of the sharded parameters (and frees
// the 16-bit gradients once the first group is cast, 2411); FSDP2 has no master copy of its own (its
// MixedPrecisionPolicy keeps float32 shards as the parameters instead).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/scenario.h"

namespace oomguard {

class MasterWeights final : public torch::optim::Optimizer {
 public:
  using MakeInner = std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<at::Tensor>&)>;

  // `stepped`: 16-bit leaves (the parameters or views of a rank's buffer), whose gradients the run
  // fills. Their float32 masters are allocated now; `make_inner` makes the optimizer that steps them,
  // in groups of about `group_elements` (0: all at once).
  MasterWeights(const std::vector<at::Tensor>& stepped, const MakeInner& make_inner, int64_t group_elements = 0);

  at::Tensor step(LossClosure closure = nullptr) override;

  int64_t MasterBytes() const;  // the float32 copies
  torch::optim::Optimizer& inner() { return *inner_; }

 private:
  std::vector<at::Tensor> stepped_;
  std::vector<at::Tensor> masters_;
  std::unique_ptr<torch::optim::Optimizer> inner_;
  std::vector<size_t> group_ends_;  // each group's end in stepped_, in order
};

// The elements of a master group under `parallel` (Note [Master weights]): DeepSpeed stage 3's default
// sub_group_size for fsdp; 0 (one group) otherwise.
int64_t MasterGroupElements(const ParallelSpec& parallel);

}  // namespace oomguard
