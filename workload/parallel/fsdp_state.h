// The state of one FSDP2 rank (FullySharded, workload/parallel/fully_sharded.h): its units, each
// parameter's shard and gathered buffers, and the unit lifecycle FSDP2's FSDPParamGroup runs (shard,
// unshard, reshard, and the pre/post forward and backward hooks). Internal to fully_sharded.cpp and
// fsdp_state.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "model/scenario.h"
#include "workload/parallel/fully_sharded.h"

namespace c10d {
class Backend;
}

namespace oomguard {
namespace fsdp_internal {

enum class Training { kIdle, kForward, kPreBackward, kPostBackward };  // FSDP2's TrainingState

struct Param {        // FSDPParam
  at::Tensor module;  // the module's parameter: the unsharded one, a view of `gathered`
  std::vector<int64_t> sizes;
  int64_t rest = 1;          // elements per dim-0 row
  int64_t padded_shard = 0;  // elements of the padded shard: ceil(dim0 / W) rows
  at::Tensor shard_data;     // _sharded_param_data
  at::Tensor sharded;        // sharded_param: the optimizer's leaf, the rank's rows of shard_data
  at::Tensor gathered;       // all_gather_outputs[0]: W x padded_shard; 0 bytes while resharded
};

struct Unit {  // FSDPParamGroup (the root's may hold no parameter: then it has no group)
  std::vector<Param> params;
  int64_t shard = 0;  // S: the padded shards' elements, summed
  bool reshard_after_forward = true;
  Training training = Training::kIdle;
  bool unsharded = false;
  at::Tensor all_gather_output;  // _all_gather_result: unshard called, copy-out not yet
  std::vector<size_t> post_forward_indices;
};

}  // namespace fsdp_internal

struct FullySharded::State {
  using Training = fsdp_internal::Training;
  using Param = fsdp_internal::Param;
  using Unit = fsdp_internal::Unit;

  ParallelSpec spec;
  c10::intrusive_ptr<c10d::Backend> group;  // Note [Real ranks on cpu], workload/parallel/rank_group.h
  std::vector<Unit> units;                  // the root first, then the units in module order
  std::vector<int> segment_unit;            // each segment's unit, or -1 (the root's)
  std::vector<size_t> post_forward_order;
  at::Tensor all_gather_state;           // forward: the last flat all-gather output, its free deferred
  at::Tensor previous_all_gather_state;  // the one before, until the next unit's copy-out is done
  at::Tensor reduce_scatter_state;       // the last reduce-scatter input
  at::Tensor all_gather_cast;            // Unshard's flat param_dtype copy of the shards, while it runs
  bool callback_queued = false;
  std::vector<at::Tensor> optimized;  // the sharded parameters, in the net's order
  c10::Device device = c10::kCPU;     // the run's: the shards', whatever the net was built on
  // Note [FSDP2 mixed precision]: MixedPrecisionPolicy's dtypes as FSDPParam.init_dtype_attrs clamps
  // them (none: no cast), and the shards' (orig_dtype).
  std::optional<at::ScalarType> param_dtype, reduce_dtype;
  at::ScalarType orig_dtype = at::kFloat;

  int64_t W() const { return spec.world; }
  void Shard(Unit& unit, std::vector<at::Tensor> params);
  void Unshard(size_t u);
  void WaitForUnshard(size_t u);
  void Reshard(size_t u);
  at::Tensor PreForward(size_t u, at::Tensor input, const std::shared_ptr<State>& self);
  void PostForward(size_t u, const at::Tensor& output, const std::shared_ptr<State>& self);
  void PreBackward(size_t u, const std::shared_ptr<State>& self);
  void PostBackward(size_t u);
  void FinalCallback();
};

}  // namespace oomguard
