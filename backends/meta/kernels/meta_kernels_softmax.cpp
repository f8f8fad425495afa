// softmax's backward (_softmax_backward_data) on meta: the grad_input the structured Meta function
// makes, which is all cpu's kernel allocates (SoftMax.cpp's softmax_backward_cpu_out: grad and output
// contiguous, no copies of contiguous ones), and in card mode what Note [softmax backward on a card]
// adds.
#include <ATen/ATen.h>
#include <ATen/ops/_softmax_backward_data_meta_dispatch.h>
#include <ATen/ops/mul_meta_dispatch.h>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// Note [softmax backward on a card]
// CUDA's softmax_backward_cuda_out (SoftMax.cu) first computes `Tensor tmp = grad * output;`, a
// temporary like the gradient (a TensorIterator product: the inputs' layout, their common dtype), then
// host_softmax_backward(tmp, output, ...) makes both contiguous (copies only of strided ones) and writes
// grad_input; tmp dies on return. So a card's softmax backward peaks one gradient's bytes above cpu's:
// an attention's [B, H, S, S] probabilities' worth on the math path. log_softmax's backward
// (log_softmax_backward_cuda_out) has no such product: host_softmax_backward(grad, output, ...) directly.
at::Tensor SoftmaxBackwardDataMeta(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                   at::ScalarType input_dtype) {
  at::Tensor grad_input = at::meta::_softmax_backward_data(grad_output, output, dim, input_dtype);
  if (!CurrentKernelTarget().cuda() || grad_output.numel() == 0) return grad_input;
  const at::Tensor tmp = at::meta::mul(grad_output, output);
  const at::Tensor tmp_contiguous = tmp.contiguous();
  const at::Tensor output_contiguous = output.contiguous();
  return grad_input;
}

}  // namespace

void RegisterSoftmax(torch::Library& meta) { meta.impl("_softmax_backward_data", TORCH_FN(SoftmaxBackwardDataMeta)); }

}  // namespace oomguard::meta_kernels
