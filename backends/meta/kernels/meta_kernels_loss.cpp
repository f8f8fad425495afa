// Meta kernels for the losses whose cpu or CUDA kernels allocate beside what LibTorch's Meta functions (if
// any) make: mse_loss and smooth_l1_loss (their unreduced loss, and cpu's float32 mean of a bf16/fp16 one),
// and those LibTorch's C++ build has no Meta kernel for: nll_loss2d, binary_cross_entropy, huber_loss,
// log_sigmoid (binary_cross_entropy_with_logits's first step) and their backwards. Which a card
// allocates differently: Note [Losses on a card].
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
// a plain mean; besides them binary cross entropy (with and without logits), smooth L1, Huber, L1 and
// KL divergence. Read against PyTorch 2.11's CUDA host code, a card allocates what cpu's kernels do (the
// outputs, and a contiguous copy only of a strided input or weight), forward and backward, in fp32, bf16
// and fp16, with two exceptions: a bf16/fp16 mean, and log_sigmoid's buffer.
// - log_softmax and its backward (SoftMax.cu, host_softmax / host_softmax_backward): the output or
//   grad_input the structured Meta function makes; input, grad and output made contiguous, as on cpu.
// - nll_loss and its backward (Loss.cu, nll_loss_forward_out_cuda_template): output and total_weight,
//   grad_input zeroed; input, target and weight contiguous: as LossNLL.cpp's cpu template.
// - nll_loss2d (NLLLoss2d.cu): total_weight and the output ([N, H, W] unreduced, else a scalar), then,
//   reducing, input, weight and target contiguous; its backward empty_like(input), a contiguous weight
//   and, reducing, target: the same bytes as cpu's (LossNLL2d.cpp), which NllLoss2d*Meta mirror.
// - mse_loss and smooth_l1_loss (Loss.cpp's TORCH_IMPL_FUNC(mse_loss_out) / (smooth_l1_loss_out),
//   shared by cpu and CUDA): the result sized like the elementwise loss by the Meta function, that
//   loss, then mean_out or sum_out; backward zeros_like(input) (mse_loss_backward,
//   smooth_l1_loss_backward). LibTorch's own smooth_l1_loss Meta function makes the result alone.
// - binary_cross_entropy (Loss.cu's binary_cross_entropy_cuda / Loss.cpp's binary_cross_entropy_cpu,
//   line for line alike): empty_like(input), the weight multiplied in place, then loss.mean() or
//   loss.sum() and loss.resize_as_(reduced): the returned scalar keeps the input-sized storage. Its
//   backward empty_like(input), weight and 1/numel applied in place.
// - huber_loss (Loss.cpp's huber_loss, CPU and CUDA): empty_like(input), then apply_loss_reduction's
//   mean() or sum() (the elementwise loss is freed on return, unlike mse's); its backward
//   zeros_like(input, Contiguous) (huber_loss_backward).
// - binary_cross_entropy_with_logits, l1_loss and kl_div are composites (Loss.cpp) that run on CUDA as
//   on cpu: log_sigmoid, (1 - target), mul_ and sub_ in place, then the reduction; (input - target).abs();
//   xlogy(target, target) - target * input (or exp(target) * (target - input)). Their backwards are
//   autograd's (binary_cross_entropy_with_logits_backward in FunctionsManual.cpp:
//   sigmoid(x), then .sub_(target), .mul_(grad) and the mean's .div_ in place for a card's and cpu's
//   tensors; meta's, being subclass-like, would take the out-of-place forms: Note
//   [binary_cross_entropy_with_logits's backward on meta], meta_kernels_loss_autograd.cpp). abs, which
//   l1_loss needs and LibTorch's C++ build has no Meta kernel for, is here.
// The exceptions: a bf16/fp16 mean on cpu adds a float32 result and a float32 copy of what it reduces
// (Note [mse_loss's reduction on cpu]; MeanDimMeta for the composites' mean()), where CUDA's mean_stub
// reduces into the result; and log_sigmoid_forward keeps an input-sized buffer on cpu
// (Activation.cpp's log_sigmoid_forward_cpu: result and buffer empty_like(input, Contiguous), of a
// contiguous copy of the input) but an empty one on CUDA (ActivationLogSigmoidKernel.cu's
// log_sigmoid_forward_cuda: result empty_like(input), buffer at::empty({0}), "buffer is only used by CPU
// dispatch"). A CUDA reduction's global scratch, sized by the card's SM count, is the reduction
// kernels' (meta_kernels_reduce.cpp): each mean or sum above asks it. tests/card_loss_test.cpp checks
// each loss both ways.

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
// cuda (mean_out's non-cpu branch): mean_stub reduces into the result, as MeanDimMeta. smooth_l1_loss's
// structured kernel (TORCH_IMPL_FUNC(smooth_l1_loss_out)) allocates the same.
at::Tensor ReducedElementwiseLossMeta(const at::Tensor& input, const at::Tensor& target, int64_t reduction) {
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

at::Tensor MseLossMeta(const at::Tensor& input, const at::Tensor& target, int64_t reduction) {
  return ReducedElementwiseLossMeta(input, target, reduction);
}
at::Tensor SmoothL1LossMeta(const at::Tensor& input, const at::Tensor& target, int64_t reduction, double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return ReducedElementwiseLossMeta(input, target, reduction);
}

// cpu and CUDA: zeros_like(input) (contiguous), then the kernel writes into it. The same for
// smooth_l1_loss_backward and huber_loss_backward (Loss.cpp), whose out= kernels LibTorch has no Meta for.
at::Tensor MseLossBackwardMeta(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                               int64_t reduction) {
  return at::empty_like(input, at::MemoryFormat::Contiguous);
}
at::Tensor SmoothL1LossBackwardMeta(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                                    int64_t reduction, double beta) {
  return at::empty_like(input, at::MemoryFormat::Contiguous);
}
at::Tensor HuberLossBackwardMeta(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                                 int64_t reduction, double delta) {
  return at::empty_like(input, at::MemoryFormat::Contiguous);
}

// Loss.cpp's apply_loss_reduction: unreduced.mean() or .sum(), a new 0-dim result (with cpu's float32
// copies of a bf16/fp16 mean, or a card's Reduce.cuh scratch: MeanDimMeta, SumDimMeta).
at::Tensor ApplyLossReduction(const at::Tensor& unreduced, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return unreduced.mean();
  if (reduction == at::Reduction::Sum) return unreduced.sum();
  return unreduced;
}

// An elementwise loss's result as empty_like(input) and TensorIterator's borrowing_binary_op make it: a
// target that broadcasts the input wider resizes it (a resize meta does not book: allocate the wide one).
at::Tensor ElementwiseLike(const at::Tensor& input, const at::Tensor& target) {
  if (input.sizes() == target.sizes()) return at::empty_like(input);
  return at::empty(at::infer_size(input.sizes(), target.sizes()), input.options());
}

// huber_loss (Loss.cpp, CPU and CUDA): empty_like(input), the elementwise loss, then its reduction; the
// elementwise loss dies on return.
at::Tensor HuberLossMeta(const at::Tensor& input, const at::Tensor& target, int64_t reduction, double delta) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return ApplyLossReduction(ElementwiseLike(input, target), reduction);
}

// binary_cross_entropy (Loss.cu's binary_cross_entropy_cuda, Loss.cpp's binary_cross_entropy_cpu):
// loss = empty_like(input), weight multiplied in place, then loss.resize_as_(reduced).copy_(reduced): the
// scalar returned keeps the input-sized storage, and the reduced 0-dim dies.
at::Tensor BinaryCrossEntropyMeta(const at::Tensor& input, const at::Tensor& target,
                                  const std::optional<at::Tensor>& weight, int64_t reduction) {
  TORCH_CHECK(input.sizes() == target.sizes(), "binary_cross_entropy: input ", input.sizes(), " and target ",
              target.sizes(), " must have the same size");
  at::Tensor loss = at::empty_like(input);
  if (reduction != at::Reduction::None) loss.resize_as_(ApplyLossReduction(loss, reduction));
  return loss;
}
// Both backwards: grad_input = empty_like(input); weight and 1/numel applied in place.
at::Tensor BinaryCrossEntropyBackwardMeta(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& target,
                                          const std::optional<at::Tensor>& weight, int64_t reduction) {
  return at::empty_like(input);
}

// abs (l1_loss's (input - target).abs()), which LibTorch's C++ build runs as abs.out, Meta-less: cpu and
// CUDA alike (UnaryOps.cpp's unary_op_impl_with_complex_to_float) make the result and resize it like self
// (a resize on meta books nothing: allocate it like self); complex inputs give their real dtype.
at::Tensor AbsMeta(const at::Tensor& self) {
  return at::empty_like(self, self.options().dtype(c10::toRealValueType(self.scalar_type())));
}
at::Tensor& AbsInplaceMeta(at::Tensor& self) {
  TORCH_CHECK(!self.is_complex(), "In-place abs is not supported for complex tensors.");
  return self;
}

// log_sigmoid_forward (binary_cross_entropy_with_logits's first step, nn.LogSigmoid): Note [Losses on a
// card]. cpu: result and buffer empty_like(input, Contiguous), then the kernel reads input.contiguous();
// CUDA: result empty_like(input) and an empty buffer.
std::tuple<at::Tensor, at::Tensor> LogSigmoidForwardMeta(const at::Tensor& input) {
  if (CurrentKernelTarget().cuda()) return {at::empty_like(input), at::empty({0}, input.options())};
  at::Tensor result = at::empty_like(input, at::MemoryFormat::Contiguous);
  at::Tensor buffer = at::empty_like(input, at::MemoryFormat::Contiguous);
  const at::Tensor input_contiguous = input.contiguous();
  return {result, buffer};
}
// log_sigmoid_backward (Activation.cpp's log_sigmoid_backward_cpu, ActivationLogSigmoidKernel.cu's
// log_sigmoid_backward_cuda): TensorIterator's output over input and grad_output, nothing else.
at::Tensor LogSigmoidBackwardMeta(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& buffer) {
  return ElementwiseLike(input, grad_output);
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
  meta.impl("smooth_l1_loss", TORCH_FN(SmoothL1LossMeta));
  meta.impl("smooth_l1_loss_backward", TORCH_FN(SmoothL1LossBackwardMeta));
  meta.impl("huber_loss", TORCH_FN(HuberLossMeta));
  meta.impl("huber_loss_backward", TORCH_FN(HuberLossBackwardMeta));
  meta.impl("binary_cross_entropy", TORCH_FN(BinaryCrossEntropyMeta));
  meta.impl("binary_cross_entropy_backward", TORCH_FN(BinaryCrossEntropyBackwardMeta));
  meta.impl("log_sigmoid_forward", TORCH_FN(LogSigmoidForwardMeta));
  meta.impl("abs", TORCH_FN(AbsMeta));
  meta.impl("abs_", TORCH_FN(AbsInplaceMeta));
  meta.impl("log_sigmoid_backward", TORCH_FN(LogSigmoidBackwardMeta));
  meta.impl("nll_loss2d_forward", TORCH_FN(NllLoss2dForwardMeta));
  meta.impl("nll_loss2d_backward", TORCH_FN(NllLoss2dBackwardMeta));
}

}  // namespace oomguard::meta_kernels
