// A ZeRO stage 1 or 2 rank's flat partition, as DeepSpeed's mixed-precision step reads it
// (Note [Master weights], workload/loop/master_weights.h): the rank's slice of the flat 16-bit buffer,
// padding included, and its 16-bit gradients, which the step flattens, casts and frees.
// DataParallel (workload/parallel/data_parallel.h) lends one; MasterWeights steps it:
//
//   FlatPartition* flat = rank->FlatPartitionForMasters();   // nullptr: the strategy has none
//   flat->FreeGradientsOutside();
//   at::Tensor grad = at::flatten_dense_tensors(flat->Gradients()).to(at::kFloat);
//   flat->FreeGradientsInside();
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace oomguard {

class FlatPartition {
 public:
  virtual ~FlatPartition() = default;
  // The rank's S = padded / world elements of the flat buffer (a view): what its master copies.
  virtual at::Tensor Slice() const = 0;
  // Frees the 16-bit gradients of the parameters the slice does not reach (DeepSpeed's
  // free_grad_in_param_list(params_not_in_partition)); backward's end has freed them already (Note
  // [Gradients between backward and step], workload/parallel/data_parallel.h).
  virtual void FreeGradientsOutside() = 0;
  // The slice's 16-bit gradients, S elements in all: one view a parameter the slice crosses, of that
  // parameter's whole gradient, then its padding's zeros (DeepSpeed's averaged_gradients, from
  // get_flat_partition). Views, no copy.
  virtual std::vector<at::Tensor> Gradients() const = 0;
  // Frees the rest of the rank's 16-bit gradients: the whole gradients the slice crosses and the
  // padding's zeros (free_grad_in_param_list(params_in_partition); averaged_gradients = None).
  virtual void FreeGradientsInside() = 0;
};

}  // namespace oomguard
