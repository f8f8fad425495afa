// Meta kernels for convolution and its backward, mirroring what cpu allocates. LibTorch's C++ build
// has none: meta's _convolution selects the Overrideable backend, which throws.
//
// The mirror takes cpu's own backend choice (at::native::select_conv_backend, asked of data-less cpu
// stand-ins of the meta tensors, since it reads only shapes, strides, dtypes and flags) and follows
// that backend: Mkldnn (most float convolutions: batches, grouped, strided or dilated ones) through
// oneDNN (backends/meta/kernels/meta_kernels_conv_onednn.h, which sizes its buffers by asking oneDNN), or
// Slow2d (im2col and a gemm: unstrided 1x1 convolutions of small batches on one thread, small single
// images, float64). Transposed 1-d and 2-d convolutions (nn.ConvTranspose1d/2d) follow cpu's
// MkldnnTranspose (oneDNN's deconvolution, same file) or SlowTranspose2d (col2im and a gemm: float64;
// backends/meta/kernels/meta_kernels_conv_transpose.h), with output_padding, groups and dilation as cpu takes
// them. Other cpu backends (SlowDilated2d for the dilated convolutions oneDNN does not get) and 3-d
// convolutions, transposed or not, fail saying they are not mirrored (model/meta_not_mirrored.h). The
// steps below follow ATen/native/Convolution.cpp and ConvolutionMM2d.cpp, in their order. With a
// card's kernels the mirror is cuDNN's instead (Note [cuDNN's convolution workspace on a card]).
#include <ATen/native/ConvUtils.h>
#include <c10/core/TensorImpl.h>

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_conv_cudnn.h"
#include "backends/meta/kernels/meta_kernels_conv_onednn.h"
#include "backends/meta/kernels/meta_kernels_conv_transpose.h"
#include "backends/meta/kernels/meta_kernels_internal.h"
#include "backends/meta/onednn_query.h"
#include "model/meta_not_mirrored.h"

namespace oomguard::meta_kernels {
namespace {

std::vector<int64_t> Expand(c10::SymIntArrayRef values, int64_t dims) {
  std::vector<int64_t> out;
  for (const c10::SymInt& v : values) out.push_back(v.expect_int());
  if (out.size() == 1 && dims > 1) out.assign(dims, out[0]);
  TORCH_CHECK(static_cast<int64_t>(out.size()) == dims, "convolution: expected ", dims, " values, got ", out.size());
  return out;
}

// ConvParams::view1d_as_2d: a conv1d runs as a conv2d over [N, C, 1, L].
void View1dAs2d(ConvParams& p) {
  p.stride.insert(p.stride.begin(), 1);
  p.padding.insert(p.padding.begin(), 0);
  p.dilation.insert(p.dilation.begin(), 1);
  if (p.transposed) p.output_padding.insert(p.output_padding.begin(), 0);
}

// The parameters as Convolution.cpp expands them; output_padding only for a transposed convolution.
ConvParams Params(int64_t k, c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                  bool transposed, c10::SymIntArrayRef output_padding, const c10::SymInt& groups) {
  ConvParams p{
      Expand(stride, k - 2), Expand(padding, k - 2), Expand(dilation, k - 2), groups.expect_int(), transposed, {}};
  if (transposed) p.output_padding = Expand(output_padding, k - 2);
  return p;
}

// A cpu tensor with t's sizes, strides, dtype and requires_grad and no data: what cpu's backend
// selection reads of a tensor.
at::Tensor CpuStandIn(const at::Tensor& t) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, at::DataPtr(nullptr, at::Device(at::kCPU)), nullptr, false);
  auto impl =
      c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides());
  at::Tensor stand_in(std::move(impl));
  if (t.requires_grad()) stand_in.set_requires_grad(true);
  return stand_in;
}

std::vector<c10::SymInt> Sym(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

// The backend cpu would run, and its memory format. need_backward (GradMode and a tensor that requires
// grad) matters only for the inference-only backends; backward passes true, as cpu's backward does.
std::pair<at::native::ConvBackend, at::MemoryFormat> CpuBackend(const at::Tensor& input, const at::Tensor& weight,
                                                                const at::Tensor& bias, const ConvParams& p,
                                                                bool need_backward) {
  at::Tensor in = CpuStandIn(input), w = CpuStandIn(weight);
  std::optional<at::Tensor> b;
  if (bias.defined()) b = CpuStandIn(bias);
  if (need_backward) in.set_requires_grad(true);
  at::AutoGradMode grad_mode(need_backward || at::GradMode::is_enabled());
  const std::vector<c10::SymInt> stride = Sym(p.stride), padding = Sym(p.padding), dilation = Sym(p.dilation),
                                 output_padding = p.transposed ? Sym(p.output_padding)
                                                               : std::vector<c10::SymInt>(p.stride.size(), 0);
  const at::native::ConvBackend backend = at::native::select_conv_backend(
      in, w, b, stride, padding, dilation, p.transposed, output_padding, p.groups, std::nullopt);
  return {backend, at::native::_determine_backend_memory_format(in, w, backend)};
}

std::string BackendName(at::native::ConvBackend backend) {
  switch (backend) {
    case at::native::ConvBackend::Empty:
      return "Empty";
    case at::native::ConvBackend::Slow3d:
      return "Slow3d";
    case at::native::ConvBackend::SlowDilated2d:
      return "SlowDilated2d";
    case at::native::ConvBackend::SlowDilated3d:
      return "SlowDilated3d";
    case at::native::ConvBackend::Xnnpack2d:
      return "Xnnpack2d";
    case at::native::ConvBackend::NnpackSpatial:
      return "NnpackSpatial";
    case at::native::ConvBackend::Winograd3x3Depthwise:
      return "Winograd3x3Depthwise";
    case at::native::ConvBackend::SlowTranspose3d:
      return "SlowTranspose3d";
    default:
      return "#" + std::to_string(static_cast<int>(backend));
  }
}

[[noreturn]] void Unmirrored(at::native::ConvBackend backend) {
  TORCH_CHECK(false, NotMirroredMessage("aten::convolution (cpu's " + BackendName(backend) + " backend)",
                                        "cpu runs that backend for this convolution, and oomguard mirrors only its "
                                        "oneDNN, Slow2d and SlowTranspose2d backends"));
}

// 3-d convolutions, transposed or not: cpu's Slow3d, SlowTranspose3d or oneDNN over 5-d tensors, not
// mirrored.
void CheckDims(int64_t k, bool transposed, const char* op) {
  TORCH_CHECK(k == 3 || k == 4,
              NotMirroredMessage(std::string("a ") + std::to_string(k - 2) + "-d " +
                                     (transposed ? "transposed convolution (" : "convolution (") + op + ")",
                                 "oomguard mirrors 1-d and 2-d convolutions only"));
}

// ---- Slow2d (ConvolutionMM2d.cpp) ----

bool UnitKernel(at::IntArrayRef kernel, const ConvParams& p) {
  return kernel[0] == 1 && kernel[1] == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 &&
         p.padding[1] == 0;
}

// compute_columns2d: im2col's [N, C*kh*kw, oh*ow] (channels last [N, oh*ow, kh*kw*C]); a view of the
// input for an unstrided, unpadded 1x1 kernel.
at::Tensor Columns(const at::Tensor& input, at::IntArrayRef kernel, const ConvParams& p, bool channels_last) {
  if (UnitKernel(kernel, p)) return {};
  const int64_t oh = (input.size(2) + 2 * p.padding[0] - kernel[0]) / p.stride[0] + 1;
  const int64_t ow = (input.size(3) + 2 * p.padding[1] - kernel[1]) / p.stride[1] + 1;
  const int64_t patch = input.size(1) * kernel[0] * kernel[1];
  return channels_last ? at::empty({input.size(0), oh * ow, patch}, input.options())
                       : at::empty({input.size(0), patch, oh * ow}, input.options());
}

// thnn_conv_use_channels_last for the cpu tensors these stand for (it asks is_cpu() of its input).
at::MemoryFormat ThnnFormat(const at::Tensor& input, const at::Tensor& weight) {
  return input.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
                 weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast
             ? at::MemoryFormat::ChannelsLast
             : at::MemoryFormat::Contiguous;
}

// slow_conv2d_forward_cpu: weight and input contiguous in the format, the columns, then the output
// (the columns die).
at::Tensor Slow2dForward(const at::Tensor& input_t, const at::Tensor& weight_t, const ConvParams& p) {
  const at::IntArrayRef kernel = weight_t.sizes().slice(2);
  const at::MemoryFormat format = ThnnFormat(input_t, weight_t);
  const at::Tensor weight = weight_t.contiguous(format), input = input_t.contiguous(format);
  const std::vector<int64_t> output_sizes =
      at::native::conv_output_size(input.sizes(), weight.sizes(), p.padding, p.stride, p.dilation);
  at::Tensor columns = Columns(input, kernel, p, format == at::MemoryFormat::ChannelsLast);
  return at::empty(output_sizes, input.options().memory_format(format));
}

// slow_conv2d_backward_cpu: grad_input (after weight, input and grad_output contiguous in the format),
// grad_bias, then grad_weight and the columns of its gemm.
std::tuple<at::Tensor, at::Tensor, at::Tensor> Slow2dBackward(const at::Tensor& grad_output_t,
                                                              const at::Tensor& input_t, const at::Tensor& weight_t,
                                                              const ConvParams& p, std::array<bool, 3> mask) {
  const at::IntArrayRef kernel = weight_t.sizes().slice(2);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) {
    const at::MemoryFormat format = ThnnFormat(input_t, weight_t);
    const at::Tensor weight = weight_t.contiguous(format), input = input_t.contiguous(format);
    const at::Tensor grad_output = grad_output_t.contiguous(format);
    grad_input = at::empty(input.sizes(), input.options().memory_format(format));
  }
  if (mask[2]) grad_bias = at::sum(grad_output_t, {0, 2, 3});
  if (mask[1]) {
    grad_weight = at::empty(weight_t.sizes(), weight_t.options().memory_format(weight_t.suggest_memory_format()));
    const at::MemoryFormat format = ThnnFormat(input_t, grad_weight);
    const at::Tensor grad_output = grad_output_t.contiguous(format);
    at::Tensor columns = Columns(input_t, kernel, p, format == at::MemoryFormat::ChannelsLast);
  }
  return {grad_input, grad_weight, grad_bias};
}

// Convolution.cpp's subtensor: group g of `tensor` along `dim`, contiguous in its suggested format.
at::Tensor Subtensor(const at::Tensor& tensor, int64_t dim, int64_t groups, int64_t g) {
  if (!tensor.defined()) return {};
  const int64_t n = tensor.size(dim) / groups;
  return tensor.narrow(dim, n * g, n).contiguous(tensor.suggest_memory_format());
}

// A backend without groups, forward or backward, on one group's tensors.
using GroupForward = std::function<at::Tensor(const at::Tensor& input, const at::Tensor& weight)>;
using GroupBackward = std::function<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight)>;

// _convolution's backends without groups, run group by group: each group's input, weight and bias
// (copies where the narrowing is not contiguous), its output, then the outputs concatenated.
at::Tensor GroupedForward(const at::Tensor& input, const at::Tensor& weight, const ConvParams& p,
                          const GroupForward& forward) {
  if (p.groups == 1) return forward(input, weight);
  std::vector<at::Tensor> outputs(p.groups);
  for (int64_t g = 0; g < p.groups; ++g) {
    const at::Tensor input_g = Subtensor(input, 1, p.groups, g), weight_g = Subtensor(weight, 0, p.groups, g);
    outputs[g] = forward(input_g, weight_g);
  }
  return at::cat(outputs, 1);
}

// convolution_backward's backends without groups, group by group, then each gradient concatenated.
std::tuple<at::Tensor, at::Tensor, at::Tensor> GroupedBackward(const at::Tensor& grad_output, const at::Tensor& input,
                                                               const at::Tensor& weight, const ConvParams& p,
                                                               std::array<bool, 3> mask,
                                                               const GroupBackward& backward) {
  if (p.groups == 1) return backward(grad_output, input, weight);
  std::vector<at::Tensor> grad_inputs(p.groups), grad_weights(p.groups), grad_biases(p.groups);
  for (int64_t g = 0; g < p.groups; ++g) {
    const at::Tensor grad_output_g = Subtensor(grad_output, 1, p.groups, g);
    const at::Tensor input_g = Subtensor(input, 1, p.groups, g), weight_g = Subtensor(weight, 0, p.groups, g);
    std::tie(grad_inputs[g], grad_weights[g], grad_biases[g]) = backward(grad_output_g, input_g, weight_g);
  }
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) grad_input = at::cat(grad_inputs, 1);
  if (mask[1]) grad_weight = at::cat(grad_weights, 0);
  if (mask[2]) grad_bias = at::cat(grad_biases, 0);
  grad_biases.clear();
  grad_weights.clear();
  grad_inputs.clear();
  return {grad_input, grad_weight, grad_bias};
}

// ---- the ops ----

// _convolution (convolution calls it unchanged): 1-d convolutions as 2-d over a contiguous input, cpu's
// backend, the backend's contiguous copies, the backend.
at::Tensor ConvolutionMirror(const at::Tensor& input_r, const at::Tensor& weight_r,
                             const std::optional<at::Tensor>& bias_opt, c10::SymIntArrayRef stride,
                             c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                             c10::SymIntArrayRef output_padding, const c10::SymInt& groups) {
  const int64_t k = weight_r.dim();
  CheckDims(k, transposed, "aten::convolution");
  ConvParams p = Params(k, stride, padding, dilation, transposed, output_padding, groups);
  at::Tensor input = input_r, weight = weight_r;
  at::Tensor bias = bias_opt.has_value() ? *bias_opt : at::Tensor();
  if (k == 3) {
    input = input.contiguous().unsqueeze(2);
    weight = weight.unsqueeze(2);
    View1dAs2d(p);
  }
  if (CurrentKernelTarget().cuda()) {
    const at::Tensor output = CudnnForward(input, weight, p);
    return k == 3 ? output.squeeze(2) : output;
  }
  const bool need_backward = at::GradMode::is_enabled() && (input_r.requires_grad() || weight_r.requires_grad() ||
                                                            (bias.defined() && bias.requires_grad()));
  const auto [backend, format] = CpuBackend(input, weight, bias, p, need_backward);
  at::Tensor output;
  switch (backend) {
    case at::native::ConvBackend::Mkldnn:
    case at::native::ConvBackend::MkldnnTranspose: {
      std::string why;
      TORCH_CHECK(onednn::Available(&why), "convolution on meta: cpu would run oneDNN here, and ", why);
      const at::Tensor input_c = input.contiguous(format), weight_c = weight.contiguous(format);
      const at::Tensor bias_c = bias.defined() ? bias.contiguous() : bias;
      output = MkldnnConvolution(input_c, weight_c, bias_c, p);
      break;
    }
    case at::native::ConvBackend::Slow2d:
    case at::native::ConvBackend::SlowTranspose2d:
      output = GroupedForward(
          input.contiguous(format), weight.contiguous(format), p, [&p](const at::Tensor& in, const at::Tensor& w) {
            return p.transposed ? SlowTranspose2dForward(in, w, p, ThnnFormat(in, w)) : Slow2dForward(in, w, p);
          });
      break;
    default:
      Unmirrored(backend);
  }
  return k == 3 ? output.squeeze(2) : output;
}

at::Tensor ConvolutionMeta(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                           bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  return ConvolutionMirror(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
}

at::Tensor UnderscoreConvolutionMeta(const at::Tensor& input, const at::Tensor& weight,
                                     const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                     c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                                     c10::SymIntArrayRef output_padding, c10::SymInt groups, bool, bool, bool, bool) {
  return ConvolutionMirror(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
}

// convolution_backward: 1-d as 2-d (input made contiguous), cpu's backend with need_backward, the
// backend's contiguous copies and backward, 1-d views back, and a bias gradient the backend left out
// summed from grad_output.
std::tuple<at::Tensor, at::Tensor, at::Tensor> ConvolutionBackwardMeta(
    const at::Tensor& grad_output_r, const at::Tensor& input_r, const at::Tensor& weight_r,
    at::OptionalSymIntArrayRef bias_sizes, c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
    c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> mask) {
  const int64_t k = weight_r.dim();
  CheckDims(k, transposed, "aten::convolution_backward");
  ConvParams p = Params(k, stride, padding, dilation, transposed, output_padding, groups);
  at::Tensor grad_output = grad_output_r, input = input_r, weight = weight_r;
  if (k == 3) {
    input = input.contiguous();
    View1dAs2d(p);
    grad_output = grad_output.unsqueeze(2);
    input = input.unsqueeze(2);
    weight = weight.unsqueeze(2);
  }
  at::Tensor grad_input, grad_weight, grad_bias;
  const auto [backend, format] = CurrentKernelTarget().cuda()
                                     ? std::pair(at::native::ConvBackend::Cudnn, CudnnFormat(input, weight))
                                     : CpuBackend(input, weight, at::Tensor(), p, /*need_backward=*/true);
  switch (backend) {
    case at::native::ConvBackend::Cudnn:
      std::tie(grad_input, grad_weight, grad_bias) = CudnnBackward(grad_output, input, weight, mask);
      break;
    case at::native::ConvBackend::Mkldnn:
    case at::native::ConvBackend::MkldnnTranspose: {
      std::string why;
      TORCH_CHECK(onednn::Available(&why), "convolution_backward on meta: cpu would run oneDNN here, and ", why);
      const at::Tensor input_c = input.contiguous(format), weight_c = weight.contiguous(format);
      std::tie(grad_input, grad_weight, grad_bias) = MkldnnConvolutionBackward(input_c, grad_output, weight_c, p, mask);
      break;
    }
    case at::native::ConvBackend::Slow2d:
    case at::native::ConvBackend::SlowTranspose2d: {
      const at::Tensor input_c = input.contiguous(format), weight_c = weight.contiguous(format);
      std::tie(grad_input, grad_weight, grad_bias) =
          GroupedBackward(grad_output, input_c, weight_c, p, mask,
                          [&p, mask](const at::Tensor& go, const at::Tensor& in, const at::Tensor& w) {
                            return p.transposed ? SlowTranspose2dBackward(go, in, w, p, mask, ThnnFormat(in, w))
                                                : Slow2dBackward(go, in, w, p, mask);
                          });
      break;
    }
    default:
      Unmirrored(backend);
  }
  if (k == 3) {
    if (mask[0]) grad_input = grad_input.squeeze(2);
    if (mask[1]) grad_weight = grad_weight.squeeze(2);
  }
  if (mask[2] && !grad_bias.defined()) grad_bias = grad_output.sum({0, 2, 3});
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

void RegisterConv(torch::Library& meta) {
  meta.impl("convolution", TORCH_FN(ConvolutionMeta));
  meta.impl("_convolution", TORCH_FN(UnderscoreConvolutionMeta));
  meta.impl("convolution_backward", TORCH_FN(ConvolutionBackwardMeta));
}

}  // namespace oomguard::meta_kernels
