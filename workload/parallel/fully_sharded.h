// One rank of FSDP2 (`fully_shard`, ZeRO-3): parameters, gradients and optimizer state sharded, a
// unit's parameters gathered for its forward and its backward only. Made by MakeRankStrategy for
// `"strategy": "fsdp"` (workload/parallel/rank_strategy.h); collectives on the rank's group (workload/parallel/rank_group.h:
// c10d::FakeProcessGroup, or gloo for real ranks on cpu), called on the Backend directly as
// data_parallel.cpp does.
//
// Note [One FSDP2 rank]
// What it mirrors, call by call, is torch/distributed/fsdp/_fully_shard/ of torch 2.11 (_fsdp_param.py,
// _fsdp_param_group.py, _fsdp_collectives.py, _fsdp_state.py) with its defaults: no MixedPrecisionPolicy
// (but Note [FSDP2 mixed precision]), reshard_after_forward=True (the root's False, as FSDP2 sets it for
// the root), no explicit prefetch, synchronous collectives, world W, rank r.
// * Units. `parallel.unit` picks them among the net's segments (the layer list, repeats expanded):
//   "layer" each segment with parameters, a layer kind ("transformer_block") each segment of that kind,
//   "model" none. Each is fully_shard(layer) in order; the root, fully_shard(model) last, holds every
//   parameter no unit holds (none with "layer"), as FSDP2's root does.
// * Sharding (FSDPParam._init_sharded_param), per unit as fully_shard runs: each parameter is chunked
//   on dim 0 as torch.chunk does (c = ceil(dim0 / W) rows a chunk; rank r has rows [r c, (r+1) c) of
//   dim0, possibly none); its padded shard, c rows, is allocated with zeros and given the rank's rows;
//   the sharded parameter the optimizer steps is its first rows (a view). The unit's original
//   parameters are freed when the unit is done (fully_shard's list of them dies on return).
// * Unshard (foreach_all_gather, foreach_all_gather_copy_out): the all-gather output, one flat buffer
//   of W x S elements (S: the unit's padded shards, summed), the rank's padded shards copied into its
//   slice, _allgather_base into it; then each parameter's own all_gather_outputs[0] of W x padded-shard
//   elements (allocated the first time, its storage resized back later), filled by
//   split_with_sizes_copy. The module's parameter is an as_strided view of it (init_unsharded_param).
//   In forward the flat buffer is kept until the next unit's copy-out is done (FSDP2's
//   all_gather_state, implicit forward prefetch's deferred free, which wait_for_unshard's local
//   `prev_all_gather_state` holds until it returns) or the root's post-forward: two flat buffers and
//   the next unit's unsharded parameters are live at once; in backward it is freed after the copy-out.
// * Reshard (free_unsharded_param): each all_gather_outputs[0]'s storage resized to 0 bytes, as
//   FSDP2's untyped_storage().resize_(0): the tensors autograd saved (the weight, its views) keep the
//   storage and see it freed, and see it again after the next unshard resizes it back (Note [Resizing
//   a storage on meta], fully_sharded.cpp). After each unit's forward; the root keeps its parameters.
// * Backward: a hook on each unit output's gradient (FSDP2's pre_backward tensor hook) gathers the
//   unit again, then prefetches the unit before it in post-forward order (FSDP2's default backward
//   prefetch: its flat all-gather output is allocated while this unit's backward runs, so two units'
//   bytes are live at once, as in PyTorch). An identity autograd function on the unit's input (FSDP2's
//   RegisterPostBackwardFunction) runs post_backward once the unit's input gradient is computed; a
//   unit whose input needs no gradient (the first layer's, the root's) is post-backwarded in the
//   engine's final callback, root first, as _root_post_backward_final_callback does.
// * post_backward (foreach_reduce): the unit's unsharded gradients are taken off the parameters, the
//   unit resharded, the previous unit's reduce-scatter input freed, a reduce-scatter input of W x S
//   elements allocated and filled by _chunk_cat (which pads a gradient whose dim0 does not divide by W
//   in a temporary copy), the gradients freed, the output of S elements allocated and reduce-scattered
//   into (AVG), and each sharded parameter's gradient is a view of it (added into an existing
//   gradient with loop.zero_grad "zero"). The last reduce-scatter input is freed in the final callback.
// * Attribution: the shards are the parameters; the sharded gradients (the reduce-scatter outputs) the
//   gradients; flat all-gather outputs, unsharded parameters and reduce-scatter inputs are
//   communication_bytes. Facts' bucket_bytes: each unit's flat all-gather output, root first.
// Note [Meta-device init]: `parallel.init` "meta" is FSDP2's recipe for a model larger than a card
//   (`with torch.device("meta"): model = ...`, fully_shard, `model.to_empty(device=...)`, then the
//   weights' init): the net is built on meta, uncounted, and only the shards are made on the run's
//   device, so setup never holds the whole model. FSDP2's to_empty makes each rank's rows unpadded and
//   pads them at the first forward (reset_sharded_param: a padded copy, the unpadded freed); here the
//   padded shard is made at once, so a padded parameter's transient copy is not seen.
// Differs from PyTorch: no DeviceMesh (FSDP2 keeps a world-sized int64 mesh tensor on the host), no
//   DTensor wrappers, no streams or events (cpu has none either); the optimizer is LibTorch's (its
//   Adam keeps the step as an integer, Python's as a 4-byte tensor per parameter). A bf16 model keeps
//   bf16 parameters, gradients and AdamW state (2 + 2 + 4 bytes a parameter, over W); with
//   loop.optimizer.master_weights the optimizer keeps a float32 master of the rank's shards and
//   float32 state (2 + 2 + 12, over W: ZeRO-3's figure; Note [Master weights],
//   workload/loop/master_weights.h). Refused with fsdp (an input error names them): a checkpointed segment
//   that holds a unit and more (Note [Checkpointing an FSDP2 unit]), the in-place parameter knob,
//   TorchScript models, and what zero stages refuse (accumulation, clipping, float16's GradScaler).
//
// Note [FSDP2 mixed precision]
// `parallel.param_dtype` and `parallel.reduce_dtype` on a float32 model are FSDP2's
// MixedPrecisionPolicy(param_dtype=..., reduce_dtype=...) (_fsdp_api.py; output_dtype none,
// cast_forward_inputs true). FSDPParam.init_dtype_attrs clamps them: reduce_dtype equal to param_dtype
// is none, param_dtype equal to the shards' dtype is none. The shards (and so the optimizer's parameters
// and state) and the sharded gradients keep the model's float32. What changes, call by call:
// * The root's and each unit's pre-forward cast a floating input to param_dtype (a new tensor; the
//   float32 batch stays the loop's).
// * Unshard (_get_param_all_gather_inputs' foreach-copy fast path): a flat param_dtype copy of the rank's
//   padded shards (S elements), then the flat all-gather output in param_dtype (W x S), the copy's
//   slices copied into its slice, the collective; the copy is freed when foreach_all_gather returns.
//   all_gather_outputs[0], and so the module's unsharded parameters, are param_dtype: forward and
//   backward run in it, and the unsharded gradients autograd makes are param_dtype.
// * foreach_reduce: the reduce-scatter input and output are reduce_dtype (none: the gradients' dtype),
//   the copy-in casting as CUDA's chunk_cat kernel does, with no temporary (ChunkCatCasting,
//   fsdp_storage.h: cpu's _chunk_cat_out would first cat into a temporary of the gradients' dtype,
//   which PyTorch on cpu shows: python/tests/test_fsdp_scenario.py itemises it); an output not in the
//   shards' dtype is cast to it (_to_dtype_if_needed: a new float32 tensor, the reduce_dtype output
//   freed at once), and the sharded gradients are views of that. With param_dtype bfloat16 and
//   reduce_dtype float32 the input is 4 W S bytes, twice the bfloat16 gradients it replaces.
// Accounting is as without: flat copies, all-gather outputs, unsharded parameters and reduce-scatter
// inputs are communication_bytes; Facts' bucket_bytes are the param_dtype all-gather outputs.
//
// Note [Autocast under FSDP2's policy]
// loop.autocast "bfloat16" with param_dtype is torch.autocast around a fully_shard-ed model's forward and
// loss, which PyTorch allows and does not adjust (_fully_shard/ never reads autocast's state; the
// policy's docstring sets the two side by side: module-level against op-level). It is not meaningless:
// the policy decides what the parameters are gathered in, autocast what each op computes in. The loop's
// scope encloses the units' pre-forward hooks, as `with torch.autocast(...): model(x)` does; the hooks'
// copies, narrows and casts are on none of autocast's lists. The gathered parameters and the cast input
// are bf16 already, so autocast's lower-precision ops (linear, matmul, conv) cast nothing, and its
// weight-cast cache, which keeps only float32 leaves' casts, stays empty; what autocast changes is its
// fp32 list: such an op (mse_loss and cross entropy on cpu; layer_norm and softmax too with a card's
// kernels) gets float32 copies of its bf16 arguments and saves those. RealRanks.AutocastUnderFsdps...
// (tests/real_ranks_test.cpp) counts mse's, and python/tests/test_fsdp_scenario.py checks what autocast
// adds against PyTorch's own fully_shard under torch.autocast, to the byte. Backward and the
// reduce-scatter run outside the scope, as without autocast. float16 autocast stays refused, as with
// every sharded strategy (its GradScaler is not simulated: scenario/variant_rules.h).
//
// Note [Checkpointing an FSDP2 unit]
// The recipe is fully_shard(checkpoint_wrapper(block)) for each block (or checkpoint(block, x,
// use_reentrant=False) around a fully_shard-ed block: the same bytes). The loop calls the rank's hooks
// around each checkpointed segment (workload/loop/pitfall_forward.cpp), so a unit's pre-forward gathers before
// its checkpoint and its post-forward reshards after it: the forward keeps the segment's input and
// output, not the gathered weights. In backward the output's gradient hook (pre_backward) gathers the
// unit and prefetches the one before, as without checkpointing; then the checkpoint recomputes the
// segment with the gathered parameters, and the unit's post_backward runs once its input's gradient is
// computed. What FSDP2 allocates during that recomputation: nothing. _FSDPState._pre_forward sees
// _training_state == PRE_BACKWARD (set by _pre_backward) and returns at once: the group is unsharded,
// so no unshard, no all-gather, no RegisterPostBackwardFunction, no forward prefetch (it unshards only
// if a post_backward had resharded it, which one forward per backward never does); _post_forward
// returns the output as well: no reshard, no pre-backward hook, no post-forward record. The
// recomputation's peak is the segment's own activations on top of the unit's gathered parameters and
// the prefetched unit's flat all-gather output. Segments must be aligned with units: a checkpointed
// segment holding a unit holds nothing else (as the loop splits layers evenly, in practice one segment
// a layer: 83 for the 70B). A segment of several units would recompute units that are resharded and
// not in PRE_BACKWARD, which FSDP2 would gather again inside the recomputation (and resharding one
// mid-backward), so the loader refuses it, naming the segment and the unit (scenario/variant_rules.h).
// Unit "model" (the root, never resharded) takes any segments. zero1 and zero2 keep whole parameters:
// their hooks are no-ops around segments, and checkpointing needs nothing more there.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "workload/parallel/rank_strategy.h"

namespace oomguard {

class FullySharded final : public RankStrategy {
 public:
  // Shards `parameters` (the net's, in its order) by units of the net's segments onto `device`, freeing
  // the originals.
  FullySharded(const ParallelSpec& spec, std::vector<at::Tensor> parameters, const Net& net,
               const at::TensorOptions& device);
  ~FullySharded() override;
  FullySharded(const FullySharded&) = delete;
  FullySharded& operator=(const FullySharded&) = delete;

  const std::vector<at::Tensor>& OptimizerParameters() const override;
  at::Tensor BeforeForward(at::Tensor input) override;
  at::Tensor AfterSegment(size_t index, at::Tensor output) override;
  at::Tensor BeforeSegment(size_t index, at::Tensor input) override;
  at::Tensor AfterForward(at::Tensor output) override;
  void ZeroGrad(bool to_none) override;
  int64_t ParameterBytes() const override;
  int64_t GradientBytes() const override;
  void Attribute(LiveBreakdown* b) const override;
  ParallelMeasurement Facts() const override;

  struct State;

 private:
  std::shared_ptr<State> state_;  // shared with the hooks autograd holds
};

}  // namespace oomguard
