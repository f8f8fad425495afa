// Times host-to-device copies on the cuda backend with CUDA events: the cost of a transfer that a
// pitfall repeats (a batch copied again inside a recomputed checkpoint region) in milliseconds of GPU time.
//
//   oomguard::CudaTransferTimer timer;   // from here on, every CPU-to-CUDA aten::copy_ is bracketed
//   ... run ...
//   double ms = timer.TotalMilliseconds();  // waits for the recorded copies to finish
//
// Each copy gets a start event before it and an end event after it on the current stream of its
// destination device, so the time is the copies' own, queued work excluded. Copies from a wrapped number
// (a kernel argument) are not transfers (Note [What counts as a transfer], transfer_counter.h).
//
// One timer at a time per process (it subscribes to ops/op_stream.h with static state); construct and destroy it on the
// controlling thread. Needs a GPU; compiles and links without one.
#pragma once

#include <cstdint>
#include <memory>

namespace oomguard {

class CudaTransferTimer {
 public:
  CudaTransferTimer();
  ~CudaTransferTimer();
  CudaTransferTimer(const CudaTransferTimer&) = delete;
  CudaTransferTimer& operator=(const CudaTransferTimer&) = delete;

  int64_t copies() const;
  double TotalMilliseconds() const;

  struct Watch;

 private:
  std::unique_ptr<Watch> watch_;
};

}  // namespace oomguard
