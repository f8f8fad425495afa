// Meta kernels for the losses whose cpu kernels allocate beside what LibTorch's Meta functions (if
// any) make: mse_loss (its unreduced loss, and cpu's float32 mean of a bf16/fp16 one) and nll_loss2d
// (no Meta kernel in LibTorch's C++ build). Which losses a card allocates differently: Note [Losses
// on a card].
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>

#include <optional>
#include <tuple>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

// Note [Losses on a card]
// The losses the catalog, the examples and the model corpus train with are cross entropy (log_softmax
// then nll_loss, or nll_loss2d for [N, C, H, W] logits and, reshaped, for [N, C, d1, ...]), mse_loss and
// a plain mean. Read against PyTorch 2.11's CUDA host code, a card allocates what cpu's kernels do
// (the outputs, and a contiguous copy only of a strided input or weight), forward and backward, in fp32,
// bf16 and fp16, with one exception (in mse_loss's bf16/fp16 mean, below):
// - log_softmax and its backward (SoftMax.cu, host_softmax / host_softmax_backward): the output or
//   grad_input the structured Meta function makes; input, grad and output made contiguous, as on cpu.
// - nll_loss and its backward (Loss.cu, nll_loss_forward_out_cuda_template): output and total_weight,
//   grad_input zeroed; input, target and weight contiguous: as LossNLL.cpp's cpu template.
// - nll_loss2d (NLLLoss2d.cu): total_weight and the output ([N, H, W] unreduced, else a scalar), then,
//   reducing, input, weight and target contiguous; its backward empty_like(input), a contiguous weight
//   and, reducing, target: the same bytes as cpu's (LossNLL2d.cpp), which NllLoss2d*Meta mirror.
// - mse_loss and its backward (Loss.cpp's TORCH_IMPL_FUNC(mse_loss_out) and mse_loss_backward, shared
//   by cpu and CUDA): the result sized like the elementwise loss, that loss, then mean_out or sum_out;
//   backward zeros_like(input). The exception is mean_out: a bf16/fp16 mean on cpu adds a float32 result
//   and a float32 copy of the loss (Note [mse_loss's reduction on cpu]); CUDA's mean_stub reduces into
//   the result, so a card has neither. The same holds for the catalog's "mean" loss (MeanDimMeta).
// Not mirrored, as none of them trains with it: binary_cross_entropy (no Meta kernel in LibTorch's C++
// build) and smooth_l1_loss (its Meta function makes the result, not the unreduced loss that cpu and
// CUDA compute into first). A CUDA reduction's global scratch, sized by the card's SM count, is the
// reduction kernels' (meta_kernels_reduce.cpp): mse_loss asks it for its mean or sum. tests/card_loss_test.cpp checks each loss both ways.

// Note [mse_loss's reduction on cpu]
// cpu (structured mse_loss): the meta function sizes the result like the elementwise loss, the
// kernel (Loss.cpp, TORCH_IMPL_FUNC(mse_loss_out)) computes that loss in a second full-size tensor,
// and at::mean_out/at::sum_out then resize the result to 0-dim, keeping its full-size storage: the
// loss a scenario holds is input-sized in bytes. sum_out reduces in the loss's dtype (the float
// accumulation is in registers). mean_out's cpu branch (ReduceOps.cpp, TORCH_IMPL_FUNC(mean_out),
// "cast_fp32 -> sum -> div -> cast_bf16_or_fp16") computes a bf16 or fp16 mean in float32: a 0-dim
// float32 result_temp (result.to(sum_out_dtype)), then at::sum_out(result_temp, self, ..., Float)
// casts the unreduced loss to a float32 copy (4 bytes an element, freed after the sum), and
// result.copy_(result_temp) frees result_temp, before the unreduced loss. The profiler's memory events of
// F.mse_loss(x, t) on a bf16 or fp16 [4, 8] x on cpu: +64 result, +64 loss, +4, +128, -128, (the
// divisor's host scalars, Note [Host scalars]), -4, -64; fp32 and reduction sum: no float32 copy.
// cuda (mean_out's non-cpu branch): mean_stub reduces into the result, as MeanDimMeta.
at::Tensor MseLossMeta(const at::Tensor& input, const at::Tensor& target, int64_t reduction) {
  const std::vector<int64_t> sizes = at::infer_size(input.sizes(), target.sizes());
  at::Tensor result = at::empty(sizes, input.options());
  if (reduction == at::Reduction::None) return result;
  at::Tensor unreduced = at::empty(sizes, input.options());
  result.resize_({});
  const at::ScalarType dtype = result.scalar_type();
  if (reduction == at::Reduction::Mean && !CurrentKernelTarget().cuda() &&  // Note [Losses on a card]
      (dtype == at::kHalf || dtype == at::kBFloat16)) {
    const at::Tensor result32 = at::empty({}, input.options().dtype(at::kFloat));
    (void)at::empty(sizes, input.options().dtype(at::kFloat));  // sum_out's float32 copy of the loss
  }
  // A card's mean_out/sum_out over the unreduced loss: Reduce.cuh's scratch (meta_kernels_reduce.cpp).
  if (CurrentKernelTarget().cuda()) meta_kernels::CudaReductionScratch(unreduced, {}, false, dtype);
  return result;
}

// cpu: zeros_like(input), then the kernel writes into it.
at::Tensor MseLossBackwardMeta(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                               int64_t reduction) {
  return at::empty_like(input, at::MemoryFormat::Contiguous);
}

// nll_loss2d (cross entropy on [N, C, H, W] logits: a segmentation model), which LibTorch's C++ build
// has no Meta kernel for. cpu (ATen/native/LossNLL2d.cpp) checks the shapes, makes total_weight a
// scalar, a contiguous copy of a strided weight, then the output ([N, H, W] unreduced, else a scalar)
// and, reducing, contiguous copies of input and target for the loop.
void CheckNllLoss2dShapes(const at::Tensor& input, const at::Tensor& target, const std::optional<at::Tensor>& weight) {
  TORCH_CHECK(target.dim() == 3,
              "only batches of spatial targets supported (3D tensors) but got targets of dimension: ", target.dim());
  TORCH_CHECK(input.dim() == 4,
              "only batches of spatial inputs supported (4D tensors), but got input of dimension: ", input.dim());
  TORCH_CHECK(!weight.has_value() || !weight->defined() || weight->numel() == input.size(1),
              "weight tensor should be defined either for all or no classes");
  TORCH_CHECK(input.size(0) == target.size(0) && input.size(2) == target.size(1) && input.size(3) == target.size(2),
              "size mismatch (got input: ", input.sizes(), " , target: ", target.sizes());
}
at::Tensor ContiguousWeight(const std::optional<at::Tensor>& weight) {
  return weight.has_value() && weight->defined() ? weight->contiguous() : at::Tensor();
}
std::tuple<at::Tensor, at::Tensor> NllLoss2dForwardMeta(const at::Tensor& input, const at::Tensor& target,
                                                        const std::optional<at::Tensor>& weight, int64_t reduction,
                                                        int64_t) {
  CheckNllLoss2dShapes(input, target, weight);
  at::Tensor total_weight = at::empty({}, input.options());
  const at::Tensor weight_contiguous = ContiguousWeight(weight);
  if (reduction == at::Reduction::None) {
    return {at::empty({input.size(0), input.size(2), input.size(3)}, input.options()), total_weight};
  }
  at::Tensor output = at::empty({}, input.options());
  if (target.numel() == 0) return {output, total_weight};
  const at::Tensor input_contiguous = input.contiguous();
  const at::Tensor target_contiguous = target.contiguous();
  return {output, total_weight};
}
// cpu: zeros_like(input), a contiguous copy of a strided weight, and reducing, of the target.
at::Tensor NllLoss2dBackwardMeta(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                                 const std::optional<at::Tensor>& weight, int64_t reduction, int64_t,
                                 const at::Tensor&) {
  CheckNllLoss2dShapes(input, target, weight);
  at::Tensor grad_input = at::empty_like(input);
  TORCH_CHECK(grad_input.is_contiguous(), "grad_input must be contiguous");
  const at::Tensor weight_contiguous = ContiguousWeight(weight);
  if (reduction != at::Reduction::None) {
    TORCH_CHECK(grad_output.dim() <= 1 && grad_output.numel() == 1,
                "Expected a single element grad_output tensor, but got: ", grad_output.sizes());
    const at::Tensor target_contiguous = target.contiguous();
  }
  return grad_input;
}

}  // namespace

void RegisterLoss(torch::Library& meta) {
  meta.impl("mse_loss", TORCH_FN(MseLossMeta));
  meta.impl("mse_loss_backward", TORCH_FN(MseLossBackwardMeta));
  meta.impl("nll_loss2d_forward", TORCH_FN(NllLoss2dForwardMeta));
  meta.impl("nll_loss2d_backward", TORCH_FN(NllLoss2dBackwardMeta));
}

}  // namespace oomguard::meta_kernels
