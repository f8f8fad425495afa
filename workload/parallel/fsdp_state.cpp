#include "workload/parallel/fsdp_state.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/engine.h>

#include <set>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <utility>

#include "base/check.h"
#include "nn/net.h"
#include "nn/scalar_type.h"
#include "workload/parallel/fsdp_storage.h"
#include "workload/parallel/rank_group.h"

namespace oomguard {

void FullySharded::State::Shard(Unit& unit, std::vector<at::Tensor> params) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : params) {
    OOMGUARD_CHECK(p.dim() >= 1) << "fsdp shards on dim 0; a 0-dim parameter has none";
    Param q;
    q.module = p;
    q.sizes = p.sizes().vec();
    q.rest = p.size(0) == 0 ? 0 : p.numel() / p.size(0);
    const int64_t rows = (p.size(0) + W() - 1) / W();
    const int64_t mine = std::max<int64_t>(0, std::min(rows, p.size(0) - spec.rank * rows));
    q.padded_shard = rows * q.rest;
    q.shard_data = at::zeros({q.padded_shard}, p.options().device(device));
    if (mine > 0 && p.device() == device)
      q.shard_data.narrow(0, 0, mine * q.rest).copy_(p.reshape(-1).narrow(0, spec.rank * rows * q.rest, mine * q.rest));
    std::vector<int64_t> sharded_sizes = q.sizes;
    sharded_sizes[0] = mine;
    q.sharded = q.shard_data.narrow(0, 0, mine * q.rest).view(sharded_sizes).detach().requires_grad_(true);
    unit.shard += q.padded_shard;
    unit.params.push_back(std::move(q));
  }
  // fully_shard returns: the unit's original parameters are freed, the module keeps a placeholder.
  // A net built on meta (Note [Meta-device init]) moves to the run's device here, which set_data refuses
  // ("incompatible tensor type"); what it does past that check is this shallow copy, and no gradient
  // accumulator exists yet for it to reset.
  for (Param& q : unit.params) {
    const at::Tensor placeholder = at::empty({0}, q.shard_data.options());
    if (q.module.device() == placeholder.device()) {
      q.module.set_data(placeholder);
    } else {
      q.module.unsafeGetTensorImpl()->shallow_copy_from(placeholder.getIntrusivePtr());
    }
  }
}

// foreach_all_gather: the flat output, the rank's padded shards copied into its slice, the collective.
void FullySharded::State::Unshard(size_t u) {
  Unit& unit = units[u];
  if (unit.all_gather_output.defined() || unit.unsharded) return;
  at::NoGradGuard no_grad;
  std::vector<int64_t> splits;
  std::vector<at::Tensor> inputs;
  for (const Param& q : unit.params) {
    splits.push_back(q.padded_shard);
    inputs.push_back(q.shard_data);
  }
  const at::TensorOptions options = unit.params.front().shard_data.options().dtype(param_dtype.value_or(orig_dtype));
  if (param_dtype) {  // _get_param_all_gather_inputs' foreach copy, freed when foreach_all_gather returns
    all_gather_cast = at::empty({unit.shard}, options);
    at::_foreach_copy_(all_gather_cast.split_with_sizes(splits), inputs);
    inputs = all_gather_cast.split_with_sizes(splits);
  }
  unit.all_gather_output = at::empty({W() * unit.shard}, options);
  at::Tensor slice = unit.all_gather_output.narrow(0, spec.rank * unit.shard, unit.shard);
  at::_foreach_copy_(slice.split_with_sizes(splits), inputs);
  group->_allgather_base(unit.all_gather_output, slice)->wait();
  inputs.clear();
  all_gather_cast.reset();
}

// wait_for_unshard: each parameter's all-gather output (re)allocated and filled, the module's
// parameter its view; the flat output's free deferred in forward, done now otherwise.
void FullySharded::State::WaitForUnshard(size_t u) {
  Unit& unit = units[u];
  if (!unit.all_gather_output.defined()) return;
  at::NoGradGuard no_grad;
  // FSDP2 drops the previous unit's deferred result here, but its local (`prev_all_gather_state`)
  // holds it until wait_for_unshard returns: it is freed after this unit's copy-out.
  if (unit.training == Training::kForward) std::swap(previous_all_gather_state, all_gather_state);
  std::vector<at::Tensor> outs;
  std::vector<int64_t> splits;
  for (Param& q : unit.params) {
    if (!q.gathered.defined()) {
      q.gathered = at::empty({W() * q.padded_shard}, unit.all_gather_output.options());
    } else {
      ResizeStorageBytes(q.gathered, q.gathered.numel() * q.gathered.element_size());
    }
    outs.push_back(q.gathered.view({W(), -1}));
    splits.push_back(q.padded_shard);
  }
  at::split_with_sizes_copy_out(outs, unit.all_gather_output.view({W(), -1}), splits, 1);
  for (Param& q : unit.params) {
    if (q.module.sizes() != at::IntArrayRef(q.sizes)) {  // init_unsharded_param, the first time
      q.module.set_data(q.gathered.as_strided(q.sizes, c10::contiguous_strides(q.sizes), 0));
    }
  }
  unit.unsharded = true;
  if (unit.training == Training::kForward) all_gather_state = unit.all_gather_output;
  unit.all_gather_output.reset();
  previous_all_gather_state.reset();
}

void FullySharded::State::Reshard(size_t u) {
  Unit& unit = units[u];
  if (unit.training == Training::kForward && !unit.reshard_after_forward) return;
  if (!unit.unsharded) return;
  for (Param& q : unit.params) ResizeStorageBytes(q.gathered, 0);  // free_unsharded_param
  unit.unsharded = false;
}

at::Tensor FullySharded::State::PreForward(size_t u, at::Tensor input, const std::shared_ptr<State>& self) {
  Unit& unit = units[u];
  unit.training = Training::kForward;
  // cast_forward_inputs (_FSDPState._pre_forward): a floating input in param_dtype, before the unshard.
  if (param_dtype && input.is_floating_point() && input.scalar_type() != *param_dtype) input = input.to(*param_dtype);
  if (!unit.params.empty()) {
    Unshard(u);
    WaitForUnshard(u);
  }
  if (unit.params.empty() || !at::GradMode::is_enabled() || !input.requires_grad()) return input;
  // RegisterPostBackwardFunction: its backward (here the hook on the alias) runs once the unit's input
  // gradient is computed, after the unit's parameters accumulated theirs.
  at::Tensor alias = input.view_as(input);
  std::weak_ptr<State> weak = self;
  alias.register_hook([weak, u](const at::Tensor&) {
    if (auto s = weak.lock()) s->PostBackward(u);
  });
  return alias;
}

void FullySharded::State::PostForward(size_t u, const at::Tensor& output, const std::shared_ptr<State>& self) {
  Unit& unit = units[u];
  if (!unit.params.empty()) {
    Reshard(u);
    unit.post_forward_indices.push_back(post_forward_order.size());
    post_forward_order.push_back(u);
  }
  if (at::GradMode::is_enabled() && output.requires_grad()) {  // _register_pre_backward_hook
    std::weak_ptr<State> weak = self;
    output.register_hook([weak, u](const at::Tensor&) {
      if (auto s = weak.lock()) s->PreBackward(u, s);
    });
  }
  unit.training = Training::kIdle;
}

void FullySharded::State::PreBackward(size_t u, const std::shared_ptr<State>& self) {
  if (!callback_queued) {  // _register_root_post_backward_final_callback
    callback_queued = true;
    std::weak_ptr<State> weak = self;
    torch::autograd::Engine::get_default_engine().queue_callback([weak] {
      if (auto s = weak.lock()) s->FinalCallback();
    });
  }
  Unit& unit = units[u];
  if (unit.params.empty() || unit.training == Training::kPreBackward) return;
  unit.training = Training::kPreBackward;
  Unshard(u);  // a no-op where prefetched
  WaitForUnshard(u);
  if (unit.post_forward_indices.empty()) return;  // _backward_prefetch: the unit before, in post-forward order
  const size_t index = unit.post_forward_indices.back();
  unit.post_forward_indices.pop_back();
  if (index == 0) return;
  Unit& target = units[post_forward_order[index - 1]];
  const Training was = target.training;
  target.training = Training::kPreBackward;
  Unshard(post_forward_order[index - 1]);
  target.training = was;
}

// post_backward and foreach_reduce.
void FullySharded::State::PostBackward(size_t u) {
  Unit& unit = units[u];
  unit.training = Training::kPostBackward;
  at::NoGradGuard no_grad;
  std::vector<Param*> with_grad;
  std::vector<at::Tensor> grads;
  for (Param& q : unit.params) {
    if (!q.gathered.defined() || !q.module.grad().defined()) continue;
    with_grad.push_back(&q);
    grads.push_back(q.module.grad());
    q.module.mutable_grad().reset();
  }
  Reshard(u);
  if (grads.empty()) return;
  reduce_scatter_state.reset();
  int64_t input_numel = 0;
  for (const Param* q : with_grad) input_numel += W() * q->padded_shard;
  at::Tensor input =
      at::empty({input_numel}, grads.front().options().dtype(reduce_dtype.value_or(grads.front().scalar_type())));
  at::Tensor rows = input.view({W(), -1});
  if (input.scalar_type() == grads.front().scalar_type()) {
    at::_chunk_cat_out(rows, grads, 0, W());
  } else {
    ChunkCatCasting(grads, rows, W());  // Note [FSDP2 mixed precision]
  }
  grads.clear();
  at::Tensor output = at::empty({input_numel / W()}, input.options());
  c10d::ReduceScatterOptions options;
  options.reduceOp = c10d::ReduceOp::AVG;
  group->_reduce_scatter_base(output, input, options)->wait();
  if (output.scalar_type() != orig_dtype) output = output.to(orig_dtype);  // the reduce_dtype output freed
  int64_t offset = 0;
  for (Param* q : with_grad) {
    const at::Tensor grad = output.as_strided(q->sharded.sizes(), q->sharded.strides(), offset);
    if (q->sharded.grad().defined()) {
      q->sharded.mutable_grad().add_(grad);
    } else {
      q->sharded.mutable_grad() = grad;
    }
    offset += q->padded_shard;
  }
  reduce_scatter_state = input;
}

// _root_post_backward_final_callback: units whose input needed no gradient are post-backwarded, root
// first; mistargeted prefetches dropped; the last reduce-scatter input freed.
void FullySharded::State::FinalCallback() {
  for (size_t u = 0; u < units.size(); ++u) {
    Unit& unit = units[u];
    if (!unit.params.empty() && unit.training != Training::kPostBackward) PostBackward(u);
    unit.training = Training::kIdle;
    unit.all_gather_output.reset();
    unit.post_forward_indices.clear();
  }
  post_forward_order.clear();
  reduce_scatter_state.reset();
  callback_queued = false;
}

}  // namespace oomguard
