// DataParallel's state (workload/parallel/data_parallel.h), shared by its sources: data_parallel.cpp
// (the strategies) and zero_partition.cpp (a zero rank's flat partition, lent to master weights).
// Not a public header: include it from those two only.
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <vector>

#include "workload/parallel/data_parallel.h"
#include "workload/parallel/flat_partition.h"

namespace oomguard {

struct ZeroBucket {
  std::vector<size_t> params;  // indices into the model's parameters, in the order they are filled
  int64_t numel = 0;
  size_t pending = 0;  // gradients not yet in during this backward
  at::Tensor staging;  // zero2: the bucket's gradients, flattened, while it fills
};

struct DataParallel::State {
  ParallelSpec spec;
  std::vector<at::Tensor> params;
  c10::intrusive_ptr<c10d::Backend> group;  // Note [Real ranks on cpu], workload/parallel/rank_group.h
  std::unique_ptr<c10d::Reducer> reducer;   // ddp
  std::vector<ZeroBucket> buckets;          // zero2's reductions
  std::vector<size_t> where;                // parameter -> its bucket
  // zero1, zero2
  at::Tensor flat;               // every parameter, padded; the parameters are its views
  std::vector<int64_t> offsets;  // each parameter's first element in flat
  int64_t numel = 0;             // the parameters' elements, unpadded
  int64_t shard = 0;             // S: elements each rank owns
  struct Piece {
    size_t param;
    int64_t begin;  // in the parameter's elements
    int64_t length;
  };
  std::vector<Piece> pieces;          // DeepSpeed's params_in_partition, in order
  std::vector<int64_t> slots;         // each piece's parameter's first element in grads_in_partition
  std::vector<int> piece_of;          // parameter -> its piece, -1 outside the slice
  std::vector<at::Tensor> optimized;  // ddp: the parameters; zero: the pieces, views of flat
  // Note [Gradients between backward and step]: the whole gradients of the parameters the slice
  // crosses (DeepSpeed's grads_in_partition), and get_flat_partition's zeros for the slice's padding.
  at::Tensor grads_in_partition;
  at::Tensor grad_padding;
  // Lent to a master-weights optimizer (Note [Master weights], workload/loop/master_weights.h).
  std::unique_ptr<FlatPartition> lent;

  bool zero() const { return spec.strategy != "ddp"; }
  int64_t owned_begin() const { return spec.rank * shard; }
  int64_t padding() const { return shard - std::clamp<int64_t>(numel - owned_begin(), 0, shard); }
  bool InSlice(size_t param) const { return piece_of[param] >= 0; }
  // The slice's gradients for piece i: a view of grads_in_partition (zeros, as get_flat_partition's
  // zeros_like, when no gradient came).
  at::Tensor PieceGradient(size_t i) const;

  void GradReady(size_t index);
  void ReduceToOwners(ZeroBucket& bucket);
  // A reduced gradient of parameter `param`, flat, summed into its slot of grads_in_partition (made
  // with the first, as copy_grads_in_partition makes it).
  void KeepInPartition(size_t param, const at::Tensor& grad);
};

// The rank's flat partition as DeepSpeed's step reads it (Note [Master weights],
// workload/loop/master_weights.h), over `s`, which outlives it.
std::unique_ptr<FlatPartition> MakeZeroPartition(DataParallel::State* s);

}  // namespace oomguard
