// Counts host-to-device copies as the operator stream shows them, not as a scenario claims them.
//
//   oomguard::TransferCounter counter(&ledger, at::kCPU);  // watches aten::copy_ (ops/op_stream.h)
//   ... run a training step ...
//   counter.count(); counter.bytes();           // copies whose source is host memory
//   counter.backward_count();                   // of those, the ones made while the ledger's phase was backward
//
// Note [What counts as a transfer]: a copy_ whose source is a CPU tensor allocated as host memory
// (inside a HostAllocationScope, cpu_tracking_allocator.h) into any tensor, or, on the cuda backend,
// any CPU-to-CUDA copy_. On the cpu backend host and "device" are both CPU memory, and the host scope
// is what tells them apart, so the same count comes out on cpu, meta and cuda. aten::_to_copy is not
// counted: it calls copy_, which is. Not transfers: copies from a wrapped number (a kernel argument,
// Note [Host scalars]) and copies into host memory.
//
// Seeing a copy's source needs every operator's inputs boxed (Note [One op dispatch]). On cpu and meta
// a transfer's source is a host block, so the counter watches only while one is alive (Note [Watching
// while host blocks live], cpu_tracking_allocator.h): a run that keeps no batch on the host pays
// nothing. On cuda it watches throughout.
//
// One counter at a time per process (it uses static counters); construct and destroy it on the
// controlling thread.
#pragma once

#include <c10/core/DeviceType.h>

#include <cstdint>
#include <memory>

#include "allocators/ledger.h"

namespace oomguard {

class TransferCounter {
 public:
  // `ledger` (optional) tells the phase each copy is made in; `device` is the backend's.
  TransferCounter(const Ledger* ledger, c10::DeviceType device);
  ~TransferCounter();
  TransferCounter(const TransferCounter&) = delete;
  TransferCounter& operator=(const TransferCounter&) = delete;

  int64_t count() const;
  int64_t bytes() const;
  int64_t backward_count() const;
  int64_t backward_bytes() const;

  struct Watch;

 private:
  std::unique_ptr<Watch> watch_;
};

}  // namespace oomguard
