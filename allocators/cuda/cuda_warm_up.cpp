#include "allocators/cuda/cuda_warm_up.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>

namespace oomguard {

void WarmUpCudaLibraries(int device) {
  const auto on_device = at::TensorOptions().device(at::kCUDA, static_cast<c10::DeviceIndex>(device));
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::Tensor a = at::ones({64, 64}, on_device.dtype(dtype));
    const at::Tensor bias = at::ones({64}, on_device.dtype(dtype));
    (void)at::mm(a, a);
    (void)at::mm(a.t(), a);  // a linear layer's backward multiplies transposed operands
    (void)at::addmm(bias, a, a);
  }
  c10::cuda::device_synchronize();
}

}  // namespace oomguard
