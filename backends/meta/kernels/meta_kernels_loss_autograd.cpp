// binary_cross_entropy_with_logits's autograd node for meta tensors: its backward as cpu and CUDA run it
// (Note [binary_cross_entropy_with_logits's backward on meta]). The forward's allocations are the
// composite's own (Note [Losses on a card], meta_kernels_loss.cpp).
#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Reduction.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>

#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Note [binary_cross_entropy_with_logits's backward on meta]
// BinaryCrossEntropyWithLogitsBackward0 saves self, target, weight and pos_weight and calls
// FunctionsManual.cpp's binary_cross_entropy_with_logits_backward (and, for a target that requires grad,
// binary_cross_entropy_with_logits_target_backward). Those work in place unless a tensor is
// subclass-like or GradMode is on:
//     grad_input = at::areAnyTensorSubclassLike({input, target}) || at::GradMode::is_enabled()
//         ? input.sigmoid().sub(target)
//         : input.sigmoid().sub_(target);
// and likewise `grad_input.mul_(grad)`, `.mul_(*weight)`, `.div_(input.sym_numel())`. A cpu or cuda
// tensor is not subclass-like, a meta tensor is (ATen/TensorSubclassLikeUtils.h: MetaBit is in
// kTensorSubclassLike), so on meta the real node would allocate the sigmoid, the difference and the
// product: two input-sized tensors more than cpu or a card (a [8, 16] float input: 1,536 bytes rather
// than 512; torch 2.11's profiler on cpu shows aten::sigmoid 512 bytes, then sub_, mul_ and div_ with
// none). This node saves what the real one saves and runs those functions with the subclass test
// answered as for the card's tensors; GradMode (create_graph) still takes the out-of-place forms. weight
// and pos_weight get no gradient, as derivatives.yaml lists none for them.
at::Tensor InputGradient(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& target,
                         const at::Tensor& weight, const at::Tensor& pos_weight, int64_t reduction) {
  const bool out_of_place = at::GradMode::is_enabled();
  at::Tensor grad_input;
  if (pos_weight.defined()) {
    const at::Tensor t = pos_weight.mul(target);
    grad_input = out_of_place ? t.add(1).sub(target).mul(input.sigmoid()).sub(t)
                              : t.add(1).sub_(target).mul_(input.sigmoid()).sub_(t);
  } else {
    grad_input = out_of_place ? input.sigmoid().sub(target) : input.sigmoid().sub_(target);
  }
  grad_input = out_of_place ? grad_input.mul(grad) : grad_input.mul_(grad);
  if (weight.defined()) grad_input = out_of_place ? grad_input.mul(weight) : grad_input.mul_(weight);
  if (reduction == at::Reduction::Mean) grad_input.div_(input.numel());
  return grad_input;
}

// binary_cross_entropy_with_logits_target_backward, its in-place forms (its weight test asks only
// isTensorSubclassLike, not GradMode).
at::Tensor TargetGradient(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& target,
                          const at::Tensor& weight, const at::Tensor& pos_weight, int64_t reduction) {
  at::Tensor grad_target;
  if (pos_weight.defined()) {
    grad_target = at::log_sigmoid(-input).sub_(at::log_sigmoid(input).mul_(pos_weight)).mul_(grad);
  } else {
    grad_target = -input * grad;
  }
  if (weight.defined()) grad_target.mul_(weight);
  if (reduction == at::Reduction::Mean) grad_target.div_(target.numel());
  return grad_target;
}

// weight and pos_weight go in as optionals: Function::apply takes an undefined at::Tensor for an input.
struct BceWithLogits : torch::autograd::Function<BceWithLogits> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& target,
                            const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& pos_weight,
                            int64_t reduction) {
    ctx->save_for_backward({input, target, weight.value_or(at::Tensor()), pos_weight.value_or(at::Tensor())});
    ctx->saved_data["reduction"] = reduction;
    // The op itself below autograd (its composite, as one op in the operator stream), not this kernel again.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return at::binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &target = saved[1], &weight = saved[2], &pos_weight = saved[3];
    const int64_t reduction = ctx->saved_data["reduction"].toInt();
    at::Tensor grad_input, grad_target;  // in the generated node's order: self, then target
    if (ctx->needs_input_grad(0)) grad_input = InputGradient(grads[0], input, target, weight, pos_weight, reduction);
    if (ctx->needs_input_grad(1)) grad_target = TargetGradient(grads[0], input, target, weight, pos_weight, reduction);
    return {grad_input, grad_target, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor BceWithLogitsAutogradMeta(const at::Tensor& input, const at::Tensor& target,
                                     const std::optional<at::Tensor>& weight,
                                     const std::optional<at::Tensor>& pos_weight, int64_t reduction) {
  const auto defined = [](const std::optional<at::Tensor>& t) {
    return t.has_value() && t->defined() ? t : std::optional<at::Tensor>();
  };
  return BceWithLogits::apply(input, target, defined(weight), defined(pos_weight), reduction);
}

}  // namespace

void RegisterLossAutograd(torch::Library& autograd_meta) {
  autograd_meta.impl("binary_cross_entropy_with_logits", TORCH_FN(BceWithLogitsAutogradMeta));
}

}  // namespace oomguard::meta_kernels
