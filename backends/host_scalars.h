// Books the cpu copies of wrapped numbers as host memory on the cpu backend.
//
//   oomguard::HostScalarCopies host_scalars;  // watches aten::_to_copy, the Scalar ops and comparisons (ops/op_stream.h)
//   ... run a training step on the cpu backend ...
//
// Note [Host scalars]: `t / 2.0`, `exp_avg.mul_(beta)` and the like wrap the number in a 0-dim cpu
// tensor, and TensorIterator casts it to the op's dtype with a 4-byte `_to_copy`. On a GPU (and on
// meta) those scalars stay on the host, beside the kernel launch; on the cpu backend they would be
// charged to the simulated device. Inside a `_to_copy` of a wrapped number this observer holds a
// HostAllocationScope, so the cpu ledger leaves them out and the cpu and meta peaks agree to the byte.
// A comparison with a number (`x > 0.1`) wraps it, 8 bytes, inside its own structured kernel, before
// allocating its result: there the observer books the op's first allocation as host memory
// (HostFirstAllocationScope).
//
// Note [The Python optimizer's step counts]: torch.optim's Adam, AdamW and their kin keep their step
// count as a 0-dim float32 cpu tensor whatever the parameters' device (`torch.tensor(0.0,
// dtype=_get_scalar_dtype())` in torch/optim/adam.py, unless capturable or fused), and the foreach
// step adds a `torch.tensor(1.0, device="cpu")` to them: host memory beside cuda (and meta)
// parameters. On the cpu backend they would be charged to the simulated device, in the ledger and in
// the caching allocator model's small pool (a 512-byte block each). While the Python package's
// optimizer step hooks say a Python optimizer is stepping (SetInPythonOptimizerStep), the observer
// books as host memory what a number made into a tensor allocates: an `aten::empty` of no dimensions
// on cpu called by the step itself (torch.tensor's internal_new_from_data), not by another operator
// (a capturable step's `torch.zeros((), device=p.device)` allocates on the parameters' device).
//
// Note [Python's wrapped numbers] (allocators/cpu_tracking_allocator.h): on the Python measurement's
// thread (SetPythonCallerThread), the observer counts the operators running, and while none runs the
// cpu allocator books what is as small as a wrapped number as host memory.
//
// One at a time per process, constructed and destroyed on the controlling thread.
#pragma once

#include <memory>

namespace oomguard {

class HostScalarCopies {
 public:
  HostScalarCopies();
  ~HostScalarCopies();
  HostScalarCopies(const HostScalarCopies&) = delete;
  HostScalarCopies& operator=(const HostScalarCopies&) = delete;

  struct Watch;

 private:
  std::unique_ptr<Watch> watch_;
};

// Note [The Python optimizer's step counts]: set by the Python package's optimizer step hooks, on the
// thread that steps; cleared when a measurement ends, should a step have raised.
void SetInPythonOptimizerStep(bool in_step);

// Note [Python's wrapped numbers]: set by the Python package on the thread its measurement runs on, from
// outside any operator; cleared when it ends (and when a HostScalarCopies is destroyed).
void SetPythonCallerThread(bool on);

}  // namespace oomguard
