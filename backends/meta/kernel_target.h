// Whose kernels the Meta kernels mirror: the cpu's (the default, byte-equal to the cpu backend) or a
// card's CUDA kernels at its compute capability (`--kernels cuda`).
//
//   oomguard::ScopedKernelTarget cuda(oomguard::KernelTarget::Cuda(75));  // a T4's kernels
//   ... meta ops ...                                                      // back to cpu's on scope exit
//
// Note [Meta as a card]: PyTorch's cpu and CUDA kernels for the same op allocate differently (dropout
// keeps a mask in the model dtype on cpu and a 1-byte mask on CUDA; bf16 layer norm keeps bf16
// statistics on cpu and fp32 on CUDA; scaled_dot_product_attention runs cpu's flash kernel on cpu and
// flash, memory-efficient or math on CUDA by compute capability, dtype and mask, each saving other
// tensors). A Meta kernel asks CurrentKernelTarget() which allocations to make; each family names the
// CUDA source it mirrors. The target is process-wide, set once before a measurement starts (a
// variant's child, or a Python measurement); kernels only read it.
//
// Note [A card's SM count in card mode]: some CUDA kernels size their scratch by what the card reports
// (cudaDeviceProp: multiProcessorCount, maxThreadsPerMultiProcessor, warpSize): Reduce.cuh's block-split
// reductions, layer norm backward's partial sums, embedding backward's fused path, flash attention's
// split-KV. A target carries them: a card preset's (allocators/cards.cpp cites each), or with no card
// named (`--cap` alone, which takes sm_80; KernelTarget::Cuda(cc) in tests) the reference card of its
// compute capability's (ReferenceDeviceProps: an A100's 108 SMs for sm_80). Python's kernels="cuda"
// takes the run's card, t4 by default, as the CLI does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocators/cards.h"

namespace oomguard {

struct KernelTarget {
  enum class Family { kCpu, kCuda };
  Family family = Family::kCpu;
  int compute_capability = 0;  // kCuda: major * 10 + minor (75 for sm_75); 0 for kCpu
  CudaDeviceProps device;      // kCuda: Note [A card's SM count in card mode]

  static KernelTarget Cpu() { return {}; }
  // The reference card of that compute capability (ReferenceDeviceProps).
  static KernelTarget Cuda(int compute_capability) {
    return {Family::kCuda, compute_capability, ReferenceDeviceProps(compute_capability)};
  }
  static KernelTarget Cuda(int compute_capability, const CudaDeviceProps& device) {
    return {Family::kCuda, compute_capability, device};
  }
  bool cuda() const { return family == Family::kCuda; }
  bool operator==(const KernelTarget&) const = default;
};

// "cpu" or "cuda sm_75".
std::string Describe(const KernelTarget& target);

const KernelTarget& CurrentKernelTarget();
void SetKernelTarget(const KernelTarget& target);

// What a Meta kernel in cuda mode could not model (a cuDNN workspace, say): one sentence per kind,
// kept once, for the measurement's warnings. A measurement takes them when it ends (TakeKernelWarnings
// clears the list); kernels only add.
void NoteKernelWarning(const std::string& warning);
// A warning that states a bound the run narrows: `text` with its "{bytes}" replaced by the least `bytes`
// noted for that text (FormatBytes, and from 1 KiB on the exact count), kept once, where first noted.
void NoteKernelWarningLeastBytes(const std::string& text, int64_t bytes);
std::vector<std::string> TakeKernelWarnings();

// Note [Unmirrored ops are said as they run]: an op meta runs with other bytes than the kernels it mirrors
// (model/meta_not_mirrored.h: the recurrent ops) notes its name from its Meta kernel, whoever called it (a
// TorchScript graph, a C++ workload, the Python loop), and the measurement says so when it ends: no
// callback on every operator (Note [One op dispatch]). "aten::lstm"; kept once each; taken as warnings are.
void NoteUnmirroredOp(const std::string& op);
std::vector<std::string> TakeUnmirroredOps();

class ScopedKernelTarget {
 public:
  explicit ScopedKernelTarget(const KernelTarget& target) : previous_(CurrentKernelTarget()) {
    SetKernelTarget(target);
  }
  ~ScopedKernelTarget() { SetKernelTarget(previous_); }
  ScopedKernelTarget(const ScopedKernelTarget&) = delete;
  ScopedKernelTarget& operator=(const ScopedKernelTarget&) = delete;

 private:
  KernelTarget previous_;
};

}  // namespace oomguard
