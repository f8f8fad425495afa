// RankStrategy: what one simulated rank of a scenario's `parallel` does around the catalog's loop
// (Note [One simulated rank], workload/parallel/data_parallel.h; Note [One FSDP2 rank], workload/parallel/fully_sharded.h).
// Its collectives go to a c10d::FakeProcessGroup, so one process measures one rank at any world size.
//
//   std::unique_ptr<RankStrategy> rank = MakeRankStrategy(spec.parallel, net->parameters(), *net, device);
//   optimizer = MakeOptimizer(kind, rank->OptimizerParameters());
//   x = rank->BeforeForward(x);                      // each forward (training and evaluation)
//   ... AfterSegment(i, out) after each segment, BeforeSegment(i + 1, out) before the next ...
//   out = rank->AfterForward(out);
//   rank->BeforeBackward(); loss.backward(); rank->AfterBackward();
//   optimizer->step(); rank->AfterStep();
// With master weights, zero1 and zero2 lend the optimizer their flat partition (FlatPartitionForMasters).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/measurement.h"
#include "model/scenario.h"
#include "workload/parallel/flat_partition.h"

namespace oomguard {

class Net;

class RankStrategy {
 public:
  virtual ~RankStrategy() = default;

  // What the optimizer steps: the model's parameters, or this rank's shards of them.
  virtual const std::vector<at::Tensor>& OptimizerParameters() const = 0;
  // Around a forward of the net's segments (fsdp gathers and frees parameters here; the others do
  // nothing), each returning the tensor the forward goes on with: BeforeForward before segment 0 (and
  // BeforeSegment(0)), AfterSegment right after segment i, BeforeSegment(i) right before segment i > 0
  // (the workload's own knobs between them), AfterForward after the last.
  virtual at::Tensor BeforeForward(at::Tensor input) { return input; }
  virtual at::Tensor AfterSegment(size_t /*index*/, at::Tensor output) { return output; }
  virtual at::Tensor BeforeSegment(size_t /*index*/, at::Tensor input) { return input; }
  virtual at::Tensor AfterForward(at::Tensor output) { return output; }
  // Before each micro-batch's backward, and after it (before the step).
  virtual void BeforeBackward() {}
  virtual void AfterBackward() {}
  virtual void AfterStep() {}
  // The model's gradients and this rank's: set to none, or zeroed.
  virtual void ZeroGrad(bool to_none) = 0;
  // What a master-weights optimizer steps in place of OptimizerParameters, DeepSpeed's one flat
  // partition (Note [Master weights], workload/loop/master_weights.h), owned by the strategy; nullptr
  // where the strategy steps pieces (ddp, fsdp). Asked for before the first backward.
  virtual FlatPartition* FlatPartitionForMasters() { return nullptr; }

  virtual int64_t ParameterBytes() const = 0;  // this rank's parameters
  virtual int64_t GradientBytes() const = 0;   // this rank's gradients now
  // Moves into *b's categories what this rank holds beyond what BreakdownByCategory counted (the
  // model's parameters as m.param_bytes, the model's gradients): shards of gradients into gradients,
  // buffers for collectives into communication_bytes, both out of activations_and_transient_bytes.
  virtual void Attribute(LiveBreakdown* b) const = 0;
  virtual ParallelMeasurement Facts() const = 0;

 protected:
  // What Attribute does with what a strategy found: `gradients` and `communication` bytes moved out of
  // activations_and_transient_bytes into their categories.
  static void MoveIntoCategories(LiveBreakdown* b, int64_t gradients, int64_t communication) {
    b->gradients_bytes += gradients;
    b->communication_bytes = communication;
    b->activations_and_transient_bytes -= gradients + communication;
  }
  static ParallelMeasurement FactsOf(const ParallelSpec& spec) {  // which rank of which run
    ParallelMeasurement m;
    m.world = spec.world;
    m.rank = spec.rank;
    m.strategy = spec.strategy;
    return m;
  }
};

// The strategy spec.strategy names, over the net's parameters (in net.parameters() order, of one
// floating dtype on one device), made after the model and before the optimizer; `device`: the run's
// device (fsdp's shards are made there, whatever device the net was built on).
std::unique_ptr<RankStrategy> MakeRankStrategy(const ParallelSpec& spec, std::vector<at::Tensor> parameters,
                                               const Net& net, const at::TensorOptions& device);

}  // namespace oomguard
