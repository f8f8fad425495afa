#include "allocators/cuda/cuda_cap.h"

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

namespace oomguard {
namespace {

std::string FormatCudaVersion(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace

double CudaMemoryFraction(int64_t cap_bytes, int64_t device_total_bytes) {
  TORCH_CHECK(cap_bytes > 0 && cap_bytes <= device_total_bytes, "oomguard: cap of ", cap_bytes,
              " bytes does not fit a device of ", device_total_bytes, " bytes");
  const double total = static_cast<double>(device_total_bytes);
  // Aim half a byte above the cap so that truncation lands on it, then mirror the allocator's
  // size_t(fraction * total) and step down while it still overshoots.
  double fraction = std::min(1.0, (static_cast<double>(cap_bytes) + 0.5) / total);
  while (fraction > 0 && static_cast<int64_t>(static_cast<size_t>(fraction * total)) > cap_bytes) {
    fraction = std::nextafter(fraction, 0.0);
  }
  return fraction;
}

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

std::string CudaRuntimeVersion() {
  int version = 0;
  cudaRuntimeGetVersion(&version);
  return FormatCudaVersion(version);
}

std::string CudaDriverVersion() {
  int version = 0;
  cudaDriverGetVersion(&version);
  return FormatCudaVersion(version);
}

int64_t ApplyCudaCap(int64_t cap_bytes, int device) {
  TORCH_CHECK(CudaDeviceCount() > device, "oomguard: no CUDA device ", device);
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  cudaDeviceProp prop{};
  C10_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const auto total = static_cast<int64_t>(prop.totalGlobalMem);
  // A cap at or past the device's memory (a bigger card than this one, or no cap) leaves it whole.
  const double fraction = cap_bytes >= total ? 1.0 : CudaMemoryFraction(cap_bytes, total);
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, static_cast<c10::DeviceIndex>(device));
  return total;
}

void SetCurrentCudaDevice(int device) { c10::cuda::set_device(static_cast<c10::DeviceIndex>(device)); }

}  // namespace oomguard
