// Meta kernels for batch norm and group norm, mirroring the cpu kernels' allocations
// (ATen/native/Normalization.cpp with cpu/batch_norm_kernel.cpp, group_norm.cpp with
// cpu/group_norm_kernel.cpp). LibTorch's C++ build has no Meta kernel for either: meta's
// native_group_norm falls back to math_group_norm, which goes through native_batch_norm. With a card's
// kernels (Note [Meta as a card]) they make the CUDA kernels' allocations instead
// (meta_kernels_norm_cuda.h: cuda/Normalization.cu, cudnn/BatchNorm.cpp, cuda/group_norm_kernel.cu),
// which python/tests/test_fake_cuda_ops.py checks against PyTorch's fake CUDA tensors.
#include <ATen/AccumulateType.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>
#include <tuple>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"
#include "backends/meta/kernels/meta_kernels_norm_cuda.h"

namespace oomguard::meta_kernels {
namespace {

const at::Tensor& Or(const std::optional<at::Tensor>& t) {
  static const at::Tensor kUndefined;
  return t.has_value() ? *t : kUndefined;
}

// Normalization.cpp's is_contiguous: contiguous in any of the dense formats.
bool DenseContiguous(const at::Tensor& t) {
  return t.is_contiguous() || t.is_contiguous(at::MemoryFormat::ChannelsLast) ||
         t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
}

// Normalization.cpp's suggest_memory_format_contig.
at::MemoryFormat ContigFormat(const at::Tensor& t) {
  if (t.is_contiguous()) return at::MemoryFormat::Contiguous;
  return t.is_contiguous(at::MemoryFormat::ChannelsLast3d) ? at::MemoryFormat::ChannelsLast3d
                                                           : at::MemoryFormat::ChannelsLast;
}

// An undefined tensor reads as contiguous (the cpu kernel asks running_mean.is_contiguous() of it too).
bool Contiguous(const at::Tensor& t) { return !t.defined() || t.is_contiguous(); }

// cpu/mixed_data_type.h: a reduced-precision input with float parameters.
bool MixedType(const at::Tensor& input, std::initializer_list<const at::Tensor*> parameters) {
  if (input.scalar_type() != at::kBFloat16 && input.scalar_type() != at::kHalf) return false;
  for (const at::Tensor* p : parameters) {
    if (p->defined()) return p->scalar_type() == at::kFloat;
  }
  return false;
}

std::vector<int64_t> AllButChannelDims(const at::Tensor& t) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < t.dim(); ++d) dims.push_back(d);
  return dims;
}

// batch_norm_kernel.cpp takes its channels-last kernels for channels-last inputs and for contiguous
// [N, C] (image size 1) ones.
bool TakesChannelsLastKernel(const at::Tensor& input) {
  const int64_t image_size = input.numel() / input.size(0) / input.size(1);
  return input.is_contiguous() ? image_size == 1 : DenseContiguous(input);
}

// cpu (batch_norm_cpu_collect_stats_kernel): the channels-last kernel sums into a zeroed
// [threads, C] buffer when there are more rows than threads; the contiguous one allocates nothing.
void CollectStatsScratch(const at::Tensor& input) {
  if (!TakesChannelsLastKernel(input)) return;
  const int64_t threads = at::get_num_threads();
  if (input.numel() / input.size(1) > threads) (void)at::zeros({threads, input.size(1)}, OpMathOptions(input));
}

// cpu (batch_norm_cpu_update_stats_template): the mean and variance sums [C] around the collection,
// for inputs dense in some format; the strided loop for the others allocates nothing.
void UpdateStatsScratch(const at::Tensor& input, const at::TensorOptions& stat_options) {
  TORCH_CHECK(input.numel() != 0, "input tensor must have at least one element, but got input_sizes = ", input.sizes());
  if (!DenseContiguous(input)) return;
  at::Tensor mean = at::empty({input.size(1)}, stat_options);
  at::Tensor var_sum = at::empty({input.size(1)}, stat_options);
  CollectStatsScratch(input);
}

// cpu (batch_norm_cpu_transform_input_template): the dense kernels fold the statistics into alpha and
// beta [C] (opmath dtype); the TensorIterator path computes eval's 1 / sqrt(running_var + eps).
void TransformScratch(const at::Tensor& input, const at::Tensor& output, const at::Tensor& weight,
                      const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var, bool train,
                      double eps) {
  const bool all_contiguous = DenseContiguous(input) && DenseContiguous(output) && Contiguous(weight) &&
                              Contiguous(bias) && Contiguous(running_mean) && Contiguous(running_var);
  if (all_contiguous) {
    if (input.numel() == 0) return;
    at::Tensor alpha = at::empty({input.size(1)}, OpMathOptions(input));
    at::Tensor beta = at::empty({input.size(1)}, OpMathOptions(input));
    return;
  }
  if (!train) at::Tensor invstd = 1 / at::sqrt(running_var + eps);
}

// cpu (batch_norm_cpu): the output in the input's dense format, then save_mean and save_invstd [C]
// (empty in eval; the mean by at::mean for an input dense in no format), then the scratch of the
// statistics and of the transform.
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNorm(const at::Tensor& input, const at::Tensor& weight,
                                                         const at::Tensor& bias, const at::Tensor& running_mean,
                                                         const at::Tensor& running_var, bool train, double eps) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input with at least 2 dimensions, got ", input.dim());
  if (CurrentKernelTarget().cuda()) return BatchNormCuda(input, weight, bias, running_mean, running_var, train);
  const bool all_contiguous = DenseContiguous(input) && Contiguous(weight) && Contiguous(bias) &&
                              Contiguous(running_mean) && Contiguous(running_var);
  at::Tensor output = at::empty_like(input, all_contiguous ? ContigFormat(input) : input.suggest_memory_format());
  const bool mixed = MixedType(input, {&weight, &bias, &running_mean, &running_var});
  const at::TensorOptions stat_options = input.options().dtype(mixed ? at::kFloat : input.scalar_type());
  at::Tensor save_mean, save_invstd;
  if (!train) {
    save_mean = at::empty({0}, stat_options);
    save_invstd = at::empty({0}, stat_options);
  } else {
    const int64_t channels = input.size(1);
    save_mean = DenseContiguous(input) ? at::empty({channels}, stat_options)
                                       : at::mean(input, AllButChannelDims(input), false,
                                                  mixed ? std::optional<at::ScalarType>(at::kFloat) : std::nullopt);
    save_invstd = at::empty({channels}, stat_options);
    UpdateStatsScratch(input, stat_options);
  }
  TransformScratch(input, output, weight, bias, running_mean, running_var, train, eps);
  return {output, save_mean, save_invstd};
}

// cpu (batch_norm_cpu_backward_kernel): the channels-last kernel's zeroed [2, threads, C] sums, after
// ones for a missing weight and eval's invstd [C] (float inputs), or float copies of weight, mean and
// invstd (reduced-precision inputs); the contiguous kernel allocates nothing.
void BackwardKernelScratch(const at::Tensor& input, const at::Tensor& weight, bool train) {
  if (!TakesChannelsLastKernel(input)) return;
  const int64_t channels = input.size(1), threads = at::get_num_threads();
  const at::TensorOptions opmath = OpMathOptions(input);
  if (at::toOpMathType(input.scalar_type()) == input.scalar_type()) {
    at::Tensor ones = weight.defined() ? at::Tensor() : at::ones({channels}, input.options());
    // cpu resizes an empty invstd to [C] in eval; resize_ on meta books nothing, so allocate it whole.
    at::Tensor invstd = at::empty({train ? 0 : channels}, input.options());
    (void)at::zeros({2, threads, channels}, input.options());
    return;
  }
  at::Tensor weight_f = at::empty({channels}, opmath);
  at::Tensor mean = at::empty({channels}, opmath);
  at::Tensor invstd = at::empty({channels}, opmath);
  (void)at::zeros({2, threads, channels}, opmath);
}

// cpu (batch_norm_backward_cpu_template): grad_input in the input's suggested format, grad_weight and
// grad_bias [C]; when input and grad_out are dense in the same format grad_input is allocated again
// (the first one dies) and the dense kernel runs, otherwise the strided path sums grad_out first.
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& running_mean,
    const at::Tensor& running_var, const at::Tensor& save_mean, const at::Tensor& save_invstd, bool train,
    std::array<bool, 3> mask) {
  if (CurrentKernelTarget().cuda()) {
    return BatchNormBackwardCuda(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                                 mask);
  }
  const bool mixed = MixedType(input, {&weight, &running_mean, &running_var, &save_mean, &save_invstd});
  const at::TensorOptions param_options = input.options().dtype(mixed ? at::kFloat : input.scalar_type());
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) grad_input = at::empty_like(input, input.suggest_memory_format());
  if (mask[1]) grad_weight = at::empty({input.size(1)}, param_options);
  if (mask[2]) grad_bias = at::empty({input.size(1)}, param_options);
  const bool all_contiguous = DenseContiguous(input) && DenseContiguous(grad_out) &&
                              input.suggest_memory_format() == grad_out.suggest_memory_format();
  if (all_contiguous) {
    if (mask[0]) grad_input = at::empty_like(input, ContigFormat(input));
    BackwardKernelScratch(input, weight, train);
    return {grad_input, grad_weight, grad_bias};
  }
  at::Tensor sum = at::sum(grad_out, AllButChannelDims(input));
  return {grad_input, grad_weight, grad_bias};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeBatchNormMeta(const at::Tensor& input,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   const std::optional<at::Tensor>& bias,
                                                                   const std::optional<at::Tensor>& running_mean,
                                                                   const std::optional<at::Tensor>& running_var,
                                                                   bool training, double, double eps) {
  return BatchNorm(input, Or(weight), Or(bias), Or(running_mean), Or(running_var), training, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeBatchNormLegitMeta(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, bool training, double, double eps) {
  return BatchNorm(input, Or(weight), Or(bias), running_mean, running_var, training, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeBatchNormLegitNoStatsMeta(const at::Tensor& input,
                                                                               const std::optional<at::Tensor>& weight,
                                                                               const std::optional<at::Tensor>& bias,
                                                                               bool training, double, double eps) {
  return BatchNorm(input, Or(weight), Or(bias), at::Tensor(), at::Tensor(), training, eps);
}

// cpu (_batch_norm_with_update_cpu, _batch_norm_no_update): batch_norm_cpu, then an empty reserve. A
// card's _batch_norm_with_update_cuda returns cudnn_batch_norm's four where _select_batch_norm_backend
// picks cuDNN.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> BatchNormWithUpdateMeta(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double, double eps) {
  if (CurrentKernelTarget().cuda() && TakesCudnnBatchNorm(input, Or(weight), Or(bias), running_mean, running_var,
                                                          /*training=*/true, eps)) {
    return CudnnBatchNorm(input, *weight, /*training=*/true);
  }
  auto [output, save_mean, save_invstd] = BatchNorm(input, Or(weight), Or(bias), running_mean, running_var, true, eps);
  return {output, save_mean, save_invstd, at::empty({0}, input.options().dtype(at::kByte))};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> BatchNormNoUpdateMeta(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, double, double eps) {
  auto [output, save_mean, save_invstd] =
      BatchNorm(input, Or(weight), Or(bias), Or(running_mean), Or(running_var), false, eps);
  return {output, save_mean, save_invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeBatchNormBackwardMeta(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train, double,
    std::array<bool, 3> mask) {
  return BatchNormBackward(grad_out, input, Or(weight), Or(running_mean), Or(running_var), Or(save_mean),
                           Or(save_invstd), train, mask);
}

// cpu (_new_batch_norm_backward_cpu): batch_norm_backward_cpu with train = update. A card's
// _new_batch_norm_backward_cuda asks _select_batch_norm_backend with a dummy bias (a defined host tensor:
// the weight stands in for it here) and training = true, and runs cudnn_batch_norm_backward where it
// picks cuDNN.
std::tuple<at::Tensor, at::Tensor, at::Tensor> BatchNormBackwardMeta(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var, bool update, double eps,
    std::array<bool, 3> mask, const at::Tensor&) {
  if (CurrentKernelTarget().cuda() &&
      TakesCudnnBatchNorm(input, weight, /*bias=*/weight, Or(running_mean), Or(running_var), /*training=*/true, eps)) {
    return CudnnBatchNormBackward(input, grad_out, weight);
  }
  return BatchNormBackward(grad_out, input, weight, Or(running_mean), Or(running_var), Or(save_mean), Or(save_var),
                           update, mask);
}

bool ChannelsLast(at::MemoryFormat format) {
  return format == at::MemoryFormat::ChannelsLast || format == at::MemoryFormat::ChannelsLast3d;
}

// cpu (native_group_norm): Y in X's suggested format, mean and rstd [N, group] (float for a
// reduced-precision X with float parameters). The contiguous kernel allocates nothing more; the
// channels-last one keeps scale and bias [N * group, 2 * C / group] below 1024 pixels, and above
// zeroed per-thread sums [threads, N, 2 * C] and the statistics [N, 2 * group].
std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeGroupNormMeta(const at::Tensor& input,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   const std::optional<at::Tensor>& bias,
                                                                   c10::SymInt n_sym, c10::SymInt c_sym,
                                                                   c10::SymInt hxw_sym, int64_t group, double) {
  const int64_t n = n_sym.expect_int(), c = c_sym.expect_int(), hxw = hxw_sym.expect_int();
  if (CurrentKernelTarget().cuda()) return GroupNormCuda(input, Or(weight), Or(bias), n, c, hxw, group);
  const at::MemoryFormat format = input.suggest_memory_format();
  TORCH_CHECK(input.is_contiguous(format), "native_group_norm: expected a contiguous input");
  const bool mixed = MixedType(input, {&Or(weight), &Or(bias)});
  const at::TensorOptions stat_options = input.options().dtype(mixed ? at::kFloat : input.scalar_type());
  at::Tensor y = at::empty_like(input, format);
  at::Tensor mean = at::empty({n, group}, stat_options);
  at::Tensor rstd = at::empty({n, group}, stat_options);
  if (ChannelsLast(format)) {
    if (hxw < 1024) {
      at::Tensor scale_bias = at::empty({n * group, 2 * (c / group)}, OpMathOptions(input));
    } else {
      at::Tensor sums = at::zeros({at::get_num_threads(), n, 2 * c}, OpMathOptions(input));
      at::Tensor stats = at::empty({n, 2 * group}, OpMathOptions(input));
    }
  }
  return {y, mean, rstd};
}

// cpu (native_group_norm_backward): dX in X's suggested format, dgamma and dbeta like gamma, then the
// kernel's ds and db [N, C] in the opmath dtype; from 2048 pixels the channels-last kernel adds zeroed
// per-thread sums [threads, N, 2 * C] and [N, 2 * group].
std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeGroupNormBackwardMeta(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor&, const at::Tensor&,
    const std::optional<at::Tensor>& weight, c10::SymInt n_sym, c10::SymInt c_sym, c10::SymInt hxw_sym, int64_t group,
    std::array<bool, 3> mask) {
  const int64_t n = n_sym.expect_int(), c = c_sym.expect_int(), hxw = hxw_sym.expect_int();
  if (CurrentKernelTarget().cuda()) return GroupNormBackwardCuda(grad_out, input, Or(weight), n, c, hxw, group, mask);
  at::Tensor dx, dgamma, dbeta;
  if (mask[0]) dx = at::empty_like(input, input.suggest_memory_format());
  if (mask[1]) dgamma = at::empty_like(Or(weight), at::MemoryFormat::Contiguous);
  if (mask[2]) dbeta = at::empty_like(Or(weight), at::MemoryFormat::Contiguous);
  at::Tensor ds = at::empty({n, c}, OpMathOptions(input));
  at::Tensor db = at::empty({n, c}, OpMathOptions(input));
  if (ChannelsLast(input.suggest_memory_format()) && hxw >= 2048) {
    at::Tensor sums = at::zeros({at::get_num_threads(), n, 2 * c}, OpMathOptions(input));
    at::Tensor stats = at::empty({n, 2 * group}, OpMathOptions(input));
  }
  return {dx, dgamma, dbeta};
}

// Channels-last group norm as cpu records it. cpu's NativeGroupNormBackward0 hands the backward kernel
// grad and X contiguous in X's suggested format; on other devices it makes them plain contiguous,
// copying both for a channels-last X. This node saves what cpu's saves (X, gamma, mean, rstd) and
// calls the backward as cpu's does.
struct ChannelsLastGroupNorm : torch::autograd::Function<ChannelsLastGroupNorm> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& gamma,
                            const at::Tensor& beta, int64_t n, int64_t c, int64_t hxw, int64_t group, double eps) {
    auto [y, mean, rstd] = at::native_group_norm(x, gamma, beta, n, c, hxw, group, eps);
    ctx->save_for_backward({x, gamma, mean, rstd});
    ctx->saved_data["shape"] = std::vector<int64_t>{n, c, hxw, group};
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &gamma = saved[1], &mean = saved[2], &rstd = saved[3];
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    const at::MemoryFormat format = x.suggest_memory_format();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    auto [dx, dgamma, dbeta] =
        at::native_group_norm_backward(grads[0].contiguous(format), x.contiguous(format), mean, rstd, gamma, shape[0],
                                       shape[1], shape[2], shape[3], mask);
    return {dx, dgamma, dbeta, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// group_norm for meta tensors (AutogradMeta): as cpu runs the composite, X contiguous in its suggested
// format (other devices make it plain contiguous: a copy of a channels-last input).
at::Tensor GroupNormAutogradMeta(const at::Tensor& input, int64_t num_groups, const std::optional<at::Tensor>& weight,
                                 const std::optional<at::Tensor>& bias, double eps, bool) {
  TORCH_CHECK(input.dim() >= 2, "group_norm: expected an input with at least 2 dimensions, got ", input.dim());
  const int64_t n = input.size(0), c = input.size(1);
  TORCH_CHECK(num_groups > 0 && c % num_groups == 0, "Expected number of channels in input to be divisible by ",
              "num_groups, but got input of shape ", input.sizes(), " and num_groups=", num_groups);
  int64_t hxw = 1;
  for (int64_t d = 2; d < input.dim(); ++d) hxw *= input.size(d);
  if (CurrentKernelTarget().cuda()) {
    // group_norm.cpp's group_norm on cuda: X = input.contiguous(), a copy of a channels-last input that
    // NativeGroupNormBackward0 keeps; native_group_norm then makes the CUDA kernel's tensors
    // (GroupNormCuda, meta_kernels_group_norm_cuda.cpp).
    const at::Tensor gamma = Or(weight).defined() ? weight->contiguous() : at::Tensor();
    const at::Tensor beta = Or(bias).defined() ? bias->contiguous() : at::Tensor();
    return std::get<0>(at::native_group_norm(input.contiguous(), gamma, beta, n, c, hxw, num_groups, eps));
  }
  const at::Tensor x = input.contiguous(input.suggest_memory_format());
  const at::Tensor gamma = Or(weight).defined() ? weight->contiguous() : at::Tensor();
  const at::Tensor beta = Or(bias).defined() ? bias->contiguous() : at::Tensor();
  if (ChannelsLast(x.suggest_memory_format())) {
    return ChannelsLastGroupNorm::apply(x, gamma, beta, n, c, hxw, num_groups, eps);
  }
  return std::get<0>(at::native_group_norm(x, gamma, beta, n, c, hxw, num_groups, eps));
}

}  // namespace

void RegisterNorm(torch::Library& meta, torch::Library& autograd_meta) {
  meta.impl("native_batch_norm", TORCH_FN(NativeBatchNormMeta));
  meta.impl("_native_batch_norm_legit", TORCH_FN(NativeBatchNormLegitMeta));
  meta.impl("_native_batch_norm_legit.no_stats", TORCH_FN(NativeBatchNormLegitNoStatsMeta));
  meta.impl("_batch_norm_with_update", TORCH_FN(BatchNormWithUpdateMeta));
  meta.impl("_batch_norm_no_update", TORCH_FN(BatchNormNoUpdateMeta));
  meta.impl("native_batch_norm_backward", TORCH_FN(NativeBatchNormBackwardMeta));
  meta.impl("batch_norm_backward", TORCH_FN(BatchNormBackwardMeta));
  meta.impl("native_group_norm", TORCH_FN(NativeGroupNormMeta));
  meta.impl("native_group_norm_backward", TORCH_FN(NativeGroupNormBackwardMeta));
  autograd_meta.impl("group_norm", TORCH_FN(GroupNormAutogradMeta));
  RegisterBatchNormCuda(meta, autograd_meta);  // cuDNN's batch norm, meta_kernels_batch_norm_cudnn.cpp
}

}  // namespace oomguard::meta_kernels
