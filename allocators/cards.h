// Card presets: the memory the CUDA runtime reports for common GPUs, and the part of it a training
// process can actually give to tensors.
//
//   const oomguard::CardPreset* t4 = oomguard::FindCard("T4", &error);
//   t4->allocator_cap_bytes()  // what the capped allocators enforce for --card t4
//
// Note [Card capacity]: total_bytes is cudaDeviceProp::totalGlobalMem as PyTorch reports it
// ("GPU 0 has a total capacity of 14.74 GiB"), not the marketing size: a "16 GB" T4 reports 14.74 GiB.
// The driver's own reservation is already gone from that figure. What is not gone is the CUDA context
// (kernels, cuBLAS/cuDNN handles): it lives in the same memory but never passes through PyTorch's
// allocator, so the cap oomguard enforces is total_bytes - context_bytes. Each figure's source is in
// cards.cpp; they drift by 0.1-0.2 GiB between driver versions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace oomguard {

// What PyTorch's CUDA kernels read from cudaDeviceProp to size their launches, and so the scratch some of
// them allocate (Reduce.cuh's setReduceConfig, layer norm backward's partial sums, embedding backward's
// fused path; backends/meta/cuda_reduce_config.h). deviceQuery prints each: "Multiprocessors", "Maximum
// number of threads per multiprocessor", "Warp size".
struct CudaDeviceProps {
  int sm_count = 0;            // multiProcessorCount
  int max_threads_per_sm = 0;  // maxThreadsPerMultiProcessor: by compute capability (CUDA C Programming
                               // Guide, "Technical Specifications per Compute Capability")
  int warp_size = 32;          // warpSize: 32 on every NVIDIA card
  bool operator==(const CudaDeviceProps&) const = default;
};

// The properties of the reference card of a compute capability, for a target that names no card (a
// cap alone, a test's KernelTarget::Cuda(75)): a V100's for sm_70, a T4's for sm_75, an A100's for
// sm_80, an A10's for sm_86, an L4's for sm_89, an H100 SXM's for sm_90, a B200's for sm_100, an RTX
// 5090's for sm_120; an A100's for any other.
CudaDeviceProps ReferenceDeviceProps(int compute_capability);

struct CardPreset {
  std::string_view key;           // what --card accepts, e.g. "a100-80gb"
  std::string_view display_name;  // e.g. "NVIDIA A100 80GB (SXM4)"
  int64_t total_bytes;            // bytes the CUDA runtime reports (Note [Card capacity])
  int64_t context_bytes;          // modelled CUDA context, unavailable to the allocator
  std::string_view source;        // where total_bytes comes from
  // major * 10 + minor (a T4 is sm_75): what picks a card's kernels on meta (`--kernels cuda`,
  // backends/meta/kernel_target.h), e.g. whether flash attention runs (sm_80 and later). NVIDIA's
  // "CUDA GPUs - Compute Capability" table.
  int compute_capability;
  CudaDeviceProps device;         // its SM count and what else the kernels read (cards.cpp cites each)

  int64_t allocator_cap_bytes() const { return total_bytes - context_bytes; }
};

// The modelled CUDA context of a torch 2.11 / CUDA 13 process with lazy module loading: 426 MiB,
// measured with torch 2.10+cu130 on an RTX 6000 Ada (unslothai/unsloth-zoo#1053). PyTorch maintainers
// quote 300-400 MB for CUDA >= 11.7 (pytorch/pytorch#107667, #109888).
inline constexpr int64_t kDefaultContextBytes = 426LL * 1024 * 1024;

// All presets, in the order `oomguard cards` prints them.
std::span<const CardPreset> AllCards();

// Case-insensitive lookup by key or alias ("T4", "rtx3090", "3090", "h100-sxm"). Returns nullptr and
// fills *error (listing every accepted key, and the candidates for an ambiguous name such as "a100").
const CardPreset* FindCard(std::string_view name, std::string* error);

}  // namespace oomguard
