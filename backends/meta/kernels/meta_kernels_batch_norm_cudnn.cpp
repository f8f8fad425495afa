// cuDNN's batch norm on a card (`--kernels cuda`, Note [Meta as a card]): which inputs take it
// (Normalization.cpp _select_batch_norm_backend, _batch_norm_impl_index) and what cudnn/BatchNorm.cpp's
// cudnn_batch_norm and cudnn_batch_norm_backward allocate (PyTorch 2.11).
#include <ATen/ops/_batch_norm_impl_index_native.h>

#include <limits>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_norm_cuda.h"

namespace oomguard::meta_kernels {
namespace {

// Note [cuDNN's batch norm reserve space is not modelled]: in training cudnn_batch_norm asks cuDNN
// for a workspace (cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize, freed on return) and a
// reserve space (_get_cudnn_batch_norm_reserve_space_size: cudnnGetBatchNormalizationTrainingExReserveSpaceSize
// with CUDNN_BATCHNORM_OPS_BN, in getCudnnBatchNormMode's mode: SPATIAL_PERSISTENT for a channels-last
// input, SPATIAL otherwise), which it returns and CudnnBatchNormBackward0 keeps for the backward;
// cudnn_batch_norm_backward asks for a workspace too (cudnnGetBatchNormalizationBackwardExWorkspaceSize).
// Their sizes are cuDNN's answers on the card, not knowable without the library and a GPU: none is
// booked (the reserve is an empty uint8 tensor, as PyTorch's own fake CUDA tensors make it), and the
// run's warnings say so once. The outputs' shapes and dtypes are exact (python/tests/test_fake_cuda_ops.py).
constexpr const char* kCudnnBatchNormWarning =
    "cudnn_batch_norm: cuDNN's reserve space (kept for the backward) and its forward and backward workspaces are "
    "sized by cuDNN on the card and are not modelled: none is booked";

std::optional<at::Tensor> Opt(const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; }

void CheckNumFeatures(const char* name, int64_t expected, const at::Tensor& t) {
  TORCH_CHECK(!t.defined() || t.numel() == expected, name, " should contain ", expected, " elements not ", t.numel());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> CudnnBatchNormMeta(
    const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>&,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, bool training, double, double) {
  return CudnnBatchNorm(input, weight, training);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> CudnnBatchNormBackwardMeta(
    const at::Tensor& input, const at::Tensor& grad_output, const at::Tensor& weight, const std::optional<at::Tensor>&,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, double,
    const at::Tensor&) {
  return CudnnBatchNormBackward(input, grad_output, weight);
}

// _batch_norm_impl_index for meta tensors: on a card, cuDNN's batch norm where _select_batch_norm_backend
// picks it (after contiguous copies of the operands, in the input's suggested format), impl index 1;
// everything else, and every input in cpu mode, is the composite's own (native_batch_norm after an
// empty reserve, index 0), as an input not on cuda takes it.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t> BatchNormImplIndexAutogradMeta(
    const at::Tensor& input, const std::optional<at::Tensor>& weight_opt, const std::optional<at::Tensor>& bias_opt,
    const std::optional<at::Tensor>& running_mean_opt, const std::optional<at::Tensor>& running_var_opt, bool training,
    double momentum, double eps, bool cudnn_enabled) {
  const at::Tensor weight = weight_opt.value_or(at::Tensor()), bias = bias_opt.value_or(at::Tensor());
  const at::Tensor running_mean = running_mean_opt.value_or(at::Tensor());
  const at::Tensor running_var = running_var_opt.value_or(at::Tensor());
  if (!CurrentKernelTarget().cuda() || input.numel() == 0 ||
      !TakesCudnnBatchNorm(input, weight, bias, running_mean, running_var, training, eps)) {
    return at::native::_batch_norm_impl_index(input, weight_opt, bias_opt, running_mean_opt, running_var_opt, training,
                                              momentum, eps, cudnn_enabled);
  }
  const int64_t features = input.size(1);
  CheckNumFeatures("running_mean", features, running_mean);
  CheckNumFeatures("running_var", features, running_var);
  CheckNumFeatures("weight", features, weight);
  CheckNumFeatures("bias", features, bias);
  const at::Tensor input_c = input.contiguous(input.suggest_memory_format());
  const at::Tensor weight_c = weight.contiguous(), bias_c = bias.contiguous();
  const at::Tensor mean_c = running_mean.defined() ? running_mean.contiguous() : running_mean;
  const at::Tensor var_c = running_var.defined() ? running_var.contiguous() : running_var;
  auto [output, save_mean, save_var, reserve] =
      at::cudnn_batch_norm(input_c, weight_c, bias_c, Opt(mean_c), Opt(var_c), training, momentum, eps);
  return {output, save_mean, save_var, reserve, 1};
}

}  // namespace

// _select_batch_norm_backend's cuDNN conditions on a card with cuDNN compiled in (cuDNN 9:
// CUDNN_BN_MIN_EPSILON is 0; PyTorch's fake CUDA tensors pick alike, test_fake_cuda_ops.py), and
// enabled unless the user turned it off (torch.backends.cudnn.enabled, true by default).
bool TakesCudnnBatchNorm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                         const at::Tensor& running_mean, const at::Tensor& running_var, bool training, double eps) {
  if (!at::globalContext().userEnabledCuDNN()) return false;
  if (!weight.defined() || !bias.defined()) return false;
  if (input.scalar_type() == at::kBFloat16 || weight.scalar_type() == at::kBFloat16) return false;
  if (input.scalar_type() == at::kHalf && weight.scalar_type() != at::kFloat) return false;
  const bool stats = running_mean.defined() && running_var.defined();
  if (!stats && !(training && !running_mean.defined() && !running_var.defined())) return false;
  if (input.dim() < 3) return false;
  if (input.size(0) > (training ? 880801 : 65535)) return false;
  return eps >= 0.0 && input.numel() < std::numeric_limits<int32_t>::max();
}

// cudnn_batch_norm: the output in the input's suggested format; in training save_mean and save_var [C]
// like the weight, then the workspace and the reserve (Note [cuDNN's batch norm reserve space is not
// modelled]); in evaluation an empty reserve, save_mean and save_var.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> CudnnBatchNorm(const at::Tensor& input,
                                                                          const at::Tensor& weight, bool training) {
  TORCH_CHECK(input.dim() >= 2 && input.dim() < 6, "cudnn_batch_norm: expected 2 to 5 dimensions, got ", input.dim());
  TORCH_CHECK(input.scalar_type() == at::kHalf ? weight.scalar_type() == at::kFloat
                                               : weight.scalar_type() == input.scalar_type(),
              "cudnn_batch_norm: weight of type ", weight.scalar_type(), " for input of type ", input.scalar_type());
  TORCH_CHECK(input.is_contiguous(input.suggest_memory_format()), "cudnn_batch_norm: expected a dense input");
  at::Tensor output = at::empty_like(input, input.suggest_memory_format());
  const at::TensorOptions bytes = input.options().dtype(at::kByte);
  if (!training) {
    at::Tensor reserve = at::empty({0}, bytes);
    return {output, at::empty({0}, weight.options()), at::empty({0}, weight.options()), reserve};
  }
  NoteKernelWarning(kCudnnBatchNormWarning);
  at::Tensor save_mean = at::empty({input.size(1)}, weight.options());
  at::Tensor save_var = at::empty({input.size(1)}, weight.options());
  return {output, save_mean, save_var, at::empty({0}, bytes)};
}

// cudnn_batch_norm_backward: grad_output contiguous in the input's suggested format (a copy where it
// is not), grad_input in that format, grad_weight and grad_bias like the weight, then the workspace.
std::tuple<at::Tensor, at::Tensor, at::Tensor> CudnnBatchNormBackward(const at::Tensor& input,
                                                                      const at::Tensor& grad_output,
                                                                      const at::Tensor& weight) {
  NoteKernelWarning(kCudnnBatchNormWarning);
  const at::MemoryFormat format = input.suggest_memory_format();
  const at::Tensor grad_output_c = grad_output.contiguous(format);
  TORCH_CHECK(input.is_contiguous(format), "cudnn_batch_norm_backward: expected a dense input");
  at::Tensor grad_input = at::empty(input.sizes(), input.options().memory_format(format));
  at::Tensor grad_weight = at::empty(weight.sizes(), weight.options());
  at::Tensor grad_bias = at::empty(weight.sizes(), weight.options());
  return {grad_input, grad_weight, grad_bias};
}

void RegisterBatchNormCuda(torch::Library& meta, torch::Library& autograd_meta) {
  meta.impl("cudnn_batch_norm", TORCH_FN(CudnnBatchNormMeta));
  meta.impl("cudnn_batch_norm_backward", TORCH_FN(CudnnBatchNormBackwardMeta));
  autograd_meta.impl("_batch_norm_impl_index", TORCH_FN(BatchNormImplIndexAutogradMeta));
}

}  // namespace oomguard::meta_kernels
