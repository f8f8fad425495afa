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

}  // namespace oomguard
