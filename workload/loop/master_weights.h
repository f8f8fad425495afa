// Mixed-precision training's optimizer (loop.optimizer.master_weights): the model's parameters and
// gradients stay bfloat16 or float16, the optimizer steps a float32 master copy of them with float32
// state, and the step's result is copied back into the model's dtype. MakeOptimizer makes it
// (workload/loop/optimizer.h) over what the run steps: the parameters, a zero rank's flat partition, or
// an fsdp rank's shards.
//
//   MasterWeights opt(stepped, [&](const std::vector<at::Tensor>& masters) { return Adam(masters); });
//   opt.step();                   // grads cast to float32, the masters stepped, copied back, casts freed
//
// Note [Master weights]
// The recipe of the ZeRO paper (K = 12: a float32 parameter, momentum and variance, 4 + 4 + 4 bytes
// per parameter on top of the 16-bit parameter and gradient, 2 + 2), as DeepSpeed's ZeRO stage 1 and 2
// optimizer runs it for bf16/fp16 (deepspeed/runtime/zero/stage_1_and_2.py at 38327e0, its lines):
// * The master is ONE flat float32 partition per param group, made with the optimizer, before the first
//   forward (__init__, 351-416): the group is flattened padded to a multiple of 2 x world elements
//   (flatten_dense_tensors_aligned with nccl_start_alignment_factor 2 times the world, 354-357),
//   get_data_parallel_partitions (1587-1605) cuts it into world equal partitions of S = padded / world
//   (padded divides evenly: no remainder), and rank r's partition is cloned to float32
//   (`weights_partition = ...[partition_id]...clone().float()`, 400) as the inner optimizer's only
//   parameter (`param_group['params'] = [self.single_partition_of_fp32_groups[i]]`, 416). So every
//   rank's master is S elements, the padding included: the last rank's padded - N (< 2 x world; a rank
//   past the parameters, at tiny N, is all padding), 12 bytes an element with Adam like the rest.
//   Here the model is one param group, so one flat buffer (Note [One simulated rank],
//   workload/parallel/data_parallel.h) and one master of the rank's slice of it (FlatPartition,
//   workload/parallel/flat_partition.h), 4 S bytes, counted as optimizer state from setup on; Adam's
//   exp_avg and exp_avg_sq, 8 S, come at the first step as LibTorch allocates them (the rank past the
//   parameters too: DeepSpeed steps its zeros).
// * The gradients the step reads are averaged_gradients, get_flat_partition's list (1723-1761, filled at
//   the end of backward, 783-790): a view of each gradient the partition crosses, then zeros for the
//   padding (16-bit, allocated then, freed with the list). step() (1886-1920), in this order: the
//   gradients of parameters outside the partition freed (free_grad_in_param_list, 1887); the list
//   flattened (torch's _flatten_dense_tensors, at::flatten_dense_tensors: a 16-bit copy of S elements,
//   or a view when the list is one tensor) and cast to float32 (4 S bytes) in one expression, the copy
//   freed when it ends (1892-1897); the partition's 16-bit gradients and the zeros freed (1904, 1906);
//   the inner step; the float32 gradient freed (1916); the master copied into the 16-bit slice (1920).
//   Here MasterWeights::step does the same through the FlatPartition, whose gradients are what
//   backward left (Note [Gradients between backward and step], workload/parallel/data_parallel.h): the
//   whole 16-bit gradients of the parameters the partition crosses and the padding's zeros, every other
//   gradient already freed (so 1887 frees nothing). So the step's peak is the cast (those gradients,
//   the 16-bit copy of S and its float32 cast: 2 + 4 bytes of S beside them) or the inner step (the
//   float32 gradient and the optimizer's temporaries, the 16-bit gradients gone), whichever is higher
//   (tests/master_weights_test.cpp derives both).
// * Without a parallel strategy, and under ddp: one master per parameter, each gradient cast where it
//   is and the 16-bit gradients live through the step (DeepSpeed's stage 0 is not this file's).
// * fsdp steps its shards in sub-groups as DeepSpeed's stage 3 does (stage3.py, same commit:
//   _create_fp16_sub_groups, 943-966, a group closed once it holds sub_group_size elements, 1e9 by
//   default in zero/config.py, 168; _prepare_fp32_grad_for_sub_group, 1895-1914, and
//   _release_sub_group, 1943-1947): each group's gradients are cast, its masters stepped, the casts
//   freed, before the next group's. The transient is one group's float32 gradients (about 4 GB on a
//   rank of the 70B), not the whole shard's. Differs from stage 3: a master per shard, parameters only,
//   no 16-bit flat copy, and the 16-bit gradients live through the step (stage 3 frees them once the
//   first group is cast, 1908); FSDP2 has no master copy of its own (its MixedPrecisionPolicy keeps
//   float32 shards as the parameters instead).
// So a rank holds 12 bytes of optimizer state per element it steps: every parameter (no parallel,
// ddp), its flat partition, padding included (zero1, zero2), or its shards (fsdp), the ZeRO paper's 12 / N.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/scenario.h"
#include "workload/parallel/flat_partition.h"

namespace oomguard {

class MasterWeights final : public torch::optim::Optimizer {
 public:
  using MakeInner = std::function<std::unique_ptr<torch::optim::Optimizer>(const std::vector<at::Tensor>&)>;

  // `stepped`: 16-bit leaves (the parameters or views of a rank's buffer), whose gradients the run
  // fills. Their float32 masters are allocated now; `make_inner` makes the optimizer that steps them,
  // in groups of about `group_elements` (0: all at once).
  MasterWeights(const std::vector<at::Tensor>& stepped, const MakeInner& make_inner, int64_t group_elements = 0);
  // zero1, zero2: one master of the rank's flat partition, padding included, whose gradients each step
  // flattens, casts and frees as DeepSpeed's does. `flat` outlives the optimizer.
  MasterWeights(FlatPartition& flat, const MakeInner& make_inner);

  at::Tensor step(LossClosure closure = nullptr) override;

  int64_t MasterBytes() const;  // the float32 copies
  torch::optim::Optimizer& inner() { return *inner_; }

 private:
  std::vector<at::Tensor> stepped_;
  std::vector<at::Tensor> masters_;
  std::unique_ptr<torch::optim::Optimizer> inner_;
  std::vector<size_t> group_ends_;  // each group's end in stepped_, in order
  FlatPartition* flat_ = nullptr;
};

// The elements of a master group under `parallel` (Note [Master weights]): DeepSpeed stage 3's default
// sub_group_size for fsdp; 0 (one group) otherwise.
int64_t MasterGroupElements(const ParallelSpec& parallel);

}  // namespace oomguard
