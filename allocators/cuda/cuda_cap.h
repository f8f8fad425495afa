// The cuda backend's cap: PyTorch's own caching allocator, limited with its per-process memory
// fraction so that a large GPU behaves like the simulated card.
//
//   if (oomguard::CudaDeviceCount() > 0) oomguard::ApplyCudaCap(LimitsForCard(*card).cap_bytes, 0);
//
// The fraction caps *reserved* bytes (segments the caching allocator holds), and the allocator frees
// its cached blocks and retries before it reports an OOM. Everything here compiles and links without a
// GPU; the functions that touch a device say so and require CudaDeviceCount() > 0.
#pragma once

#include <cstdint>
#include <string>

namespace oomguard {

// The fraction f with floor(f * device_total_bytes) == cap_bytes where doubles allow, and never above
// it, so the caching allocator's allowed maximum (size_t(f * total)) does not exceed the cap.
// Pure arithmetic: testable anywhere. Requires 0 < cap_bytes <= device_total_bytes.
double CudaMemoryFraction(int64_t cap_bytes, int64_t device_total_bytes);

// Number of CUDA devices the driver shows (0 without a driver or GPU; never throws).
int CudaDeviceCount();

// "13.0"-style versions of the CUDA runtime linked in and of the driver ("none" without a driver).
std::string CudaRuntimeVersion();
std::string CudaDriverVersion();

// Needs a GPU: initialises CUDA on `device` and sets the memory fraction for cap_bytes (1.0, the
// whole device, when cap_bytes is at or past its memory). Returns the device's total memory.
int64_t ApplyCudaCap(int64_t cap_bytes, int device);

// Needs a GPU: makes `device` this process's current CUDA device (a real rank's own GPU), where what
// names no device runs: a tensor on plain kCUDA, cuBLAS's handles, NCCL's communicator.
void SetCurrentCudaDevice(int device);

}  // namespace oomguard
