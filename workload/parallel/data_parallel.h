// One rank of a data-parallel or ZeRO-sharded step in the catalog's loop (scenario `parallel`), its
// collectives issued on the group workload/parallel/rank_group.h gives it: a c10d::FakeProcessGroup, whose
// collectives move no data, so one process measures one rank at any world size (meta), or gloo among
// real ranks (cpu, Note [Real ranks on cpu]). oomguard calls the Backend directly, not through the
// dispatcher, which has no Meta kernels for c10d's ops in a C++ process.
//
//   DataParallel dp(spec.parallel, net->parameters());    // after the model, before the optimizer
//   optimizer = MakeOptimizer(kind, dp.OptimizerParameters());
//   dp.ZeroGrad(/*to_none=*/true);
//   dp.BeforeBackward(); loss.backward(); dp.AfterBackward();  // the hooks reduce bucket by bucket
//   optimizer->step(); dp.AfterStep();
//
// Note [One simulated rank]
// What each strategy holds, and whose behaviour it mirrors (N: the parameters' elements):
// * ddp (torch.nn.parallel.DistributedDataParallel): c10d::Reducer itself, over a c10d::ProcessGroup
//   whose backend is the fake group, with find_unused_parameters false, bucket_cap_mb and
//   gradient_as_bucket_view as given. Full parameters, gradients and optimizer state; the Reducer's
//   bucket buffers are allocated when it is made (setup) and kept. Its buckets are given the layout DDP's
//   Reducer rebuilds after the first iteration: the parameters in reverse order (the order their
//   gradients become ready), c10d::compute_bucket_assignment_by_size with a first bucket of 1 MiB when
//   bucket_cap_mb is the default 25 (dist._DEFAULT_FIRST_BUCKET_BYTES), bucket_cap_mb after. Python's
//   DDP starts with one bucket of every parameter and rebuilds before the second forward: the same
//   bytes; oomguard never calls rebuild_buckets, whose broadcast reaches c10d::broadcast_, which has no
//   Meta kernel in a C++ process. Each backward is prepared as DDP's forward prepares it
//   (prepare_for_forward, prepare_for_backward); the Reducer copies each accumulated gradient into its
//   bucket view, reduces a full bucket through FakeAllReduceHook (data_parallel.cpp: why a hook), and
//   after backward copies the buckets back into the gradients. With gradient_as_bucket_view the
//   gradients become the views (their own tensors freed), so the buckets are the gradients; without
//   it every gradient has a bucket copy: twice the gradients' bytes.
// * zero1, zero2 (DeepSpeed ZeRO stage 1 and 2, stage_1_and_2.py): the parameters are flattened, in
//   order, into one buffer padded to a multiple of 2 x world elements (DeepSpeed's
//   nccl_start_alignment_factor 2 times the world size), from host copies (Note [ZeRO flattens from host
//   copies], data_parallel.cpp), and become views of it; rank r owns the slice
//   [r S, (r+1) S) with S = padded / world, and steps it: the optimizer sees the pieces of the slice, one
//   per parameter it crosses (views, no copy), so its state is 8 bytes (Adam) per element of the slice
//   that is a parameter (DeepSpeed, which keeps its state for the whole partition, has up to
//   8 x (2 world - 1) bytes more on the last rank). A bf16 or fp16 model with
//   loop.optimizer.master_weights steps the slice as DeepSpeed does, one float32 master of all S
//   elements, padding included, with float32 state, 12 bytes an element, its gradients flattened, cast
//   and freed by the step (FlatPartitionForMasters; Note [Master weights], workload/loop/master_weights.h).
//   After the step the slice is all-gathered into the flat buffer in place (_allgather_base).
//   Between backward and the step both stages hold what DeepSpeed holds (Note [Gradients between
//   backward and step]); the slice's pieces get their gradients as views of it.
//   zero1: after backward each gradient is all-reduced in place, the slice's copied out, all freed.
//   zero2: gradients are bucketed as ddp's (no 1 MiB first bucket); each accumulated gradient is
//   copied into its bucket's staging buffer (allocated with the bucket's first gradient) and freed, as
//   DeepSpeed's contiguous_gradients copies into its ipg buffer; a full bucket's parts are reduced to
//   the ranks that own them (c10d reduce with that root, as DeepSpeed's average_tensor), the slice's
//   parameters' whole gradients are copied out, and the staging is freed. (DeepSpeed's backward()
//   allocates one ipg buffer of reduce_bucket_size elements, 5e8 by default, at its start and frees it
//   at its end (2048-2061, _release_ipg_buffers 676-679), for stage 1 too; oomguard stages bucket_cap_mb
//   a bucket instead, while the bucket fills.)
//
// Note [Gradients between backward and step]
// DeepSpeed's stage 1 and 2 (stage_1_and_2.py at 38327e0) end every backward alike, whatever the dtype
// and whatever the step: stage 2's reduce hooks (create_reduce_and_remove_grad_hooks, 904-920) and
// stage 1's reduce_gradients after backward (706-726, called by the engine's allreduce_gradients,
// engine.py 2048-2060) both go through reduce_ipg_grads (1365-1416), which copies the WHOLE gradient of
// each parameter in the partition (params_in_partition: every parameter with an element in
// [r S, (r+1) S), get_partition_info 1607-1636) into grads_in_partition, one buffer of their total
// elements made with the first copy (copy_grads_in_partition, 1344-1360), and drops the others (stage 2,
// clear_grad_attribute 1411) or leaves them views of the ipg buffer (stage 1). The epilogue
// (independent_gradient_partition_epilogue, 764-807) takes get_flat_partition's views of those
// (1723-1761), adding zeros for the partition's padding (1755-1756), releases the ipg buffer and
// grads_in_partition's name, and zero_grad(set_to_none=True) frees every .grad (807, 1638-1653). So
// from the end of backward to the step a rank holds, in the model's dtype, the whole gradients of the
// parameters its partition crosses (more than S when a partition starts or ends inside one) and the
// padding's zeros (the last rank's padded - N, all S on a rank past the parameters); the step frees both
// (1904-1906). oomguard's zero1 and zero2 keep exactly these (State::grads_in_partition, grad_padding),
// with or without master weights. DeepSpeed has no step without a float32 master (it clones its
// partition to float32 for fp32 models too, line 400): without loop.optimizer.master_weights oomguard's
// zero strategies mirror DeepSpeed's gradients and parameters, and step the slice's pieces in place
// with LibTorch's optimizer in the model's dtype, the padding's zeros unread. Differences:
// grads_in_partition is laid out in parameter order (DeepSpeed's in reduction order: the same bytes),
// zero-filled where no gradient came (get_flat_partition's zeros_like is a second buffer there); zero1
// reduces each gradient where it is, not through the ipg buffer.
#pragma once#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/measurement.h"
#include "model/scenario.h"
#include "workload/parallel/rank_strategy.h"

namespace oomguard {

class DataParallel final : public RankStrategy {
 public:
  // `parameters`: the model's, in order, of one floating dtype on one device. Flattens them for zero1
  // and zero2, allocates ddp's buckets, and hooks each parameter's gradient accumulation.
  DataParallel(const ParallelSpec& spec, std::vector<at::Tensor> parameters);
  ~DataParallel() override;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // What the optimizer steps: the model's parameters (ddp), or the pieces of this rank's slice (zero).
  const std::vector<at::Tensor>& OptimizerParameters() const override;
  // zero1, zero2: the rank's flat partition (workload/parallel/flat_partition.h); from then on the
  // pieces get no gradients, the partition's step frees them; nullptr for ddp.
  FlatPartition* FlatPartitionForMasters() override;
  // Before each micro-batch's backward: every bucket waits for its gradients again.
  void BeforeBackward() override;
  // After backward (ddp: gradients copied back from their buckets) and before the step (zero1: the
  // gradients all-reduced; zero: what DeepSpeed keeps until the step, Note [Gradients between backward
  // and step], the rest freed, and the slice's pieces given their gradients as views of it).
  void AfterBackward() override;
  void AfterStep() override;  // zero: the updated slice all-gathered
  // The model's gradients and the zero strategies' kept ones: set to none, or zeroed.
  void ZeroGrad(bool to_none) override;

  int64_t ParameterBytes() const override;  // this rank's: the model's, or the flat padded buffer
  int64_t GradientBytes() const override;   // this rank's now: the model's gradients and the zero ones
  // Moves into *b's categories what this rank holds beyond the model's gradients (which b counts
  // already): the zero strategies' kept gradients and padding zeros into gradients; buckets and staging into communication_bytes, but a
  // bucket's bytes that are a gradient's view (gradient_as_bucket_view) stay gradients. Both come
  // out of activations_and_transient_bytes, so the categories still sum to what was live.
  void Attribute(LiveBreakdown* b) const override;
  ParallelMeasurement Facts() const override;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace oomguard
