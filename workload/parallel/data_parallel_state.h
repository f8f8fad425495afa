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
  std::vector<Piece> pieces;
  std::vector<at::Tensor> optimized;  // ddp: the parameters; zero: the pieces, views of flat
  at::Tensor grad_shard;              // zero2: this rank's reduced gradients, S elements
  // Lent to a master-weights optimizer (Note [Master weights], workload/loop/master_weights.h): then
  // zero1's padding has gradients too, get_flat_partition's zeros, from each backward to the step.
  std::unique_ptr<FlatPartition> lent;
  at::Tensor grad_padding;

  bool zero() const { return spec.strategy != "ddp"; }
  int64_t owned_begin() const { return spec.rank * shard; }
  int64_t padding() const { return shard - std::clamp<int64_t>(numel - owned_begin(), 0, shard); }
  bool InSlice(size_t param) const {
    return std::any_of(pieces.begin(), pieces.end(), [param](const Piece& p) { return p.param == param; });
  }

  void GradReady(size_t index);
  void ReduceToOwners(ZeroBucket& bucket);
};

// The rank's flat partition as DeepSpeed's step reads it (Note [Master weights],
// workload/loop/master_weights.h), over `s`, which outlives it.
std::unique_ptr<FlatPartition> MakeZeroPartition(DataParallel::State* s);

}  // namespace oomguard
