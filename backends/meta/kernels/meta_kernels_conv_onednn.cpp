#include "backends/meta/kernels/meta_kernels_conv_onednn.h"

#include <ATen/native/ConvUtils.h>
#include <ATen/ops/empty.h>

#include "backends/meta/onednn_query.h"

namespace oomguard::meta_kernels {
namespace {

using onednn::Arg;
using onednn::MemoryDesc;
using onednn::Primitive;

// A meta block of `bytes` standing for a buffer ideep allocates through c10's cpu allocator.
at::Tensor Block(int64_t bytes, const at::Tensor& like) {
  if (bytes <= 0) return {};
  return at::empty({bytes}, like.options().dtype(at::kByte));
}

MemoryDesc PlainDesc(const at::Tensor& t) {
  return MemoryDesc::Strided(t.sizes().vec(), t.strides().vec(), t.scalar_type());
}

using onednn::Op;

// The weights' dims as oneDNN takes them: [O, I/G, kh, kw], or [G, O/G, I/G, kh, kw] when grouped, as
// ideep's make_grouped_weights and to_grouped shape them. A transposed convolution's PyTorch weights
// are [I, O/G, kh, kw]; oneDNN's deconvolution takes them in the same [o, i] order as a convolution.
std::vector<int64_t> WeightDims(at::IntArrayRef weight_sizes, int64_t groups, Op op = Op::kConvolution) {
  std::vector<int64_t> dims = weight_sizes.vec();
  if (op == Op::kDeconvolution) {
    dims[0] = weight_sizes[1] * groups;
    dims[1] = weight_sizes[0] / groups;
  }
  if (groups <= 1) return dims;
  dims[0] /= groups;
  dims.insert(dims.begin(), groups);
  return dims;
}

// The weights as ideep sees them: a view of the dense tensor, regrouped with default strides; a
// transposed convolution's regrouped as [G, I/G, O/G, ...] and transposed to [G, O/G, I/G, ...]
// (make_grouped_weights with is_deconv; the dense tensor's strides carry through).
MemoryDesc WeightDesc(const at::Tensor& weight, int64_t groups, Op op = Op::kConvolution) {
  if (op == Op::kConvolution) {
    return groups > 1 ? MemoryDesc::Contiguous(WeightDims(weight.sizes(), groups), weight.scalar_type())
                      : PlainDesc(weight);
  }
  if (groups <= 1) return PlainDesc(weight).Transposed(0, 1);
  std::vector<int64_t> dims = weight.sizes().vec(), strides = weight.strides().vec();
  dims[0] /= groups;
  dims.insert(dims.begin(), groups);
  strides.insert(strides.begin(), dims[1] * strides[0]);
  return MemoryDesc::Strided(dims, strides, weight.scalar_type()).Transposed(1, 2);
}

// A deconvolution's weight gradient desc back in PyTorch's [i, o] order (ideep's transpose_ after
// backward weights).
MemoryDesc ToPytorchOrder(const MemoryDesc& desc, int64_t groups, Op op) {
  if (op == Op::kConvolution) return desc;
  return groups > 1 ? desc.Transposed(1, 2) : desc.Transposed(0, 1);
}

MemoryDesc Query(const std::vector<int64_t>& dims, at::ScalarType dtype, bool channels_last) {
  return channels_last ? MemoryDesc::ChannelsLast(dims, dtype) : MemoryDesc::Any(dims, dtype);
}

// ideep's reorder_to: the reorder's scratchpad, freed when it has run.
void ReorderScratchpad(const MemoryDesc& from, const MemoryDesc& to, const at::Tensor& like) {
  (void)Block(Primitive::Reorder(from, to).Bytes(Arg::kScratchpad), like);
}

// ideep's reorder_if_differ_in: a buffer in the layout the primitive wants when the tensor's differs.
at::Tensor ReorderIfDiffer(const MemoryDesc& actual, const MemoryDesc& expected, const at::Tensor& like) {
  if (actual == expected) return {};
  at::Tensor buffer = Block(expected.bytes(), like);
  ReorderScratchpad(actual, expected, like);
  return buffer;
}

// mkldnn_to_dense of an ideep tensor in `desc` with logical sizes `sizes`: a dense tensor the reorder
// fills; a plain desc keeps its strides there (to_public), and contiguous() then copies them into a
// second dense tensor unless they already are contiguous (the first dies).
at::Tensor ToDense(const MemoryDesc& desc, at::IntArrayRef sizes, const at::Tensor& like) {
  at::Tensor dense = at::empty(sizes, like.options());
  const bool plain = desc.plain();
  const MemoryDesc pub = plain ? desc : MemoryDesc::Contiguous(desc.dims(), like.scalar_type());
  ReorderScratchpad(desc, pub, like);
  if (!plain) return dense;
  std::vector<int64_t> strides = desc.strides();
  if (strides.size() == sizes.size() + 1) strides.erase(strides.begin());  // grouped weights: [G, O/G] -> O
  return dense.as_strided(sizes, strides).contiguous();
}

// mkldnn_convolution(_transpose)_backward_input (ideep's convolution(_transpose)_backward_data::
// compute_v2/v3): a channels-last grad_input first; then reordered grad_output and weights, grad_input
// in the implementation's layout and the scratchpad; the scratchpad and reorders die, and grad_input is
// made dense.
at::Tensor MkldnnBackwardInput(at::IntArrayRef input_size, const at::Tensor& grad_output, const at::Tensor& weight,
                               const ConvParams& p, bool channels_last, at::MemoryFormat format, Op op) {
  at::Tensor grad_input;
  if (channels_last) grad_input = at::empty(input_size, grad_output.options().memory_format(format));
  const at::ScalarType dtype = grad_output.scalar_type();
  const MemoryDesc diff_dst = Query(grad_output.sizes().vec(), dtype, channels_last);
  const MemoryDesc weights = MemoryDesc::Any(WeightDims(weight.sizes(), p.groups, op), dtype);
  const MemoryDesc diff_src = Query(input_size.vec(), dtype, channels_last);
  // ideep's convolution hint runs without a user scratchpad, its deconvolution hint with one.
  const Primitive hint =
      Primitive::ConvForward(diff_src, weights, MemoryDesc(), diff_dst, p.stride, p.OnednnDilates(), p.padding,
                             p.PaddingR(), /*user_scratchpad=*/op == Op::kDeconvolution, op);
  const Primitive pd = Primitive::ConvBackwardData(diff_src, weights, diff_dst, p.stride, p.OnednnDilates(), p.padding,
                                                   p.PaddingR(), hint);
  at::Tensor expected_diff_dst = ReorderIfDiffer(PlainDesc(grad_output), pd.Desc(Arg::kDiffDst), grad_output);
  at::Tensor expected_weights = ReorderIfDiffer(WeightDesc(weight, p.groups, op), pd.Desc(Arg::kWeights), grad_output);
  const MemoryDesc diff_src_desc = pd.Desc(Arg::kDiffSrc);
  at::Tensor grad_x;
  if (!channels_last || PlainDesc(grad_input) != diff_src_desc) grad_x = Block(diff_src_desc.bytes(), grad_output);
  at::Tensor scratchpad = Block(pd.Bytes(Arg::kScratchpad), grad_output);
  scratchpad.reset();
  expected_weights.reset();
  expected_diff_dst.reset();
  if (channels_last) return grad_input;
  at::Tensor dense = ToDense(diff_src_desc, input_size, grad_output);
  grad_x.reset();
  return dense;
}

// mkldnn_convolution(_transpose)_backward_weights (ideep's convolution(_transpose)_backward_weights::
// compute_v2/v3): reordered grad_output and input, grad_weight in the implementation's layout, the
// scratchpad, grad_bias; then dense grad_bias and grad_weight (arguments evaluate right to left), each
// ideep tensor dying after. A deconvolution's grad_weight goes back to PyTorch's [i, o] order first.
std::tuple<at::Tensor, at::Tensor> MkldnnBackwardWeights(at::IntArrayRef weight_size, const at::Tensor& grad_output,
                                                         const at::Tensor& input, const ConvParams& p,
                                                         bool bias_defined, bool channels_last, at::MemoryFormat format,
                                                         Op op) {
  const at::ScalarType dtype = grad_output.scalar_type();
  const MemoryDesc diff_weights = MemoryDesc::Any(WeightDims(weight_size, p.groups, op), dtype);
  const MemoryDesc diff_dst = Query(grad_output.sizes().vec(), dtype, channels_last);
  const MemoryDesc src = Query(input.sizes().vec(), dtype, channels_last);
  const MemoryDesc diff_bias = bias_defined ? MemoryDesc::Any({grad_output.size(1)}, dtype) : MemoryDesc();
  const Primitive hint = Primitive::ConvForward(src, diff_weights, diff_bias, diff_dst, p.stride, p.OnednnDilates(),
                                                p.padding, p.PaddingR(), /*user_scratchpad=*/true, op);
  const Primitive pd = Primitive::ConvBackwardWeights(src, diff_weights, diff_bias, diff_dst, p.stride,
                                                      p.OnednnDilates(), p.padding, p.PaddingR(), hint);
  at::Tensor expected_diff_dst = ReorderIfDiffer(PlainDesc(grad_output), pd.Desc(Arg::kDiffDst), grad_output);
  at::Tensor expected_src = ReorderIfDiffer(PlainDesc(input), pd.Desc(Arg::kSrc), grad_output);
  const MemoryDesc grad_w_desc = pd.Desc(Arg::kDiffWeights);
  at::Tensor grad_w = Block(grad_w_desc.bytes(), grad_output);
  at::Tensor scratchpad = Block(pd.Bytes(Arg::kScratchpad), grad_output);
  const MemoryDesc grad_b_desc = bias_defined ? pd.Desc(Arg::kDiffBias) : MemoryDesc();
  at::Tensor grad_b = Block(grad_b_desc.bytes(), grad_output);
  if (op == Op::kDeconvolution) ReorderScratchpad(grad_w_desc, grad_w_desc, grad_output);  // feed_from itself
  scratchpad.reset();
  expected_src.reset();
  expected_diff_dst.reset();
  at::Tensor dense_b = bias_defined ? ToDense(grad_b_desc, {grad_output.size(1)}, grad_output) : at::Tensor();
  at::Tensor dense_w = ToDense(ToPytorchOrder(grad_w_desc, p.groups, op), weight_size, grad_output);
  at::Tensor result_w = channels_last ? dense_w.to(format) : dense_w;
  dense_w.reset();
  grad_w.reset();
  grad_b.reset();
  return {result_w, dense_b};
}

bool ChannelsLast(const at::Tensor& input, const at::Tensor& weight, at::MemoryFormat* format) {
  const bool channels_last = at::native::mkldnn_conv_use_channels_last(input, weight);
  *format = !channels_last     ? at::MemoryFormat::Contiguous
            : input.dim() == 4 ? at::MemoryFormat::ChannelsLast
                               : at::MemoryFormat::ChannelsLast3d;
  return channels_last;
}

// _mkldnn_convolution(_transpose) with ideep's convolution(_transpose)_forward::compute_v3: channels-last
// output allocated first; then the scratchpad, reordered input and weights when the implementation
// wants other layouts, the output in its layout; the reorders and the scratchpad die, and a
// non-channels-last output is made dense. oneDNN's fpmath mode stays strict, as cpu's does unless mkldnn
// convolutions' float32 precision is set to bf16 (then cpu's choice of implementation may differ).
at::Tensor MkldnnForward(const at::Tensor& input_t, const at::Tensor& weight_t, const at::Tensor& bias,
                         const ConvParams& p, Op op) {
  at::MemoryFormat format;
  const bool channels_last = ChannelsLast(input_t, weight_t, &format);
  const std::vector<int64_t> output_sizes =
      op == Op::kConvolution
          ? at::native::conv_output_size(input_t.sizes(), weight_t.sizes(), p.padding, p.stride, p.dilation)
          : at::native::conv_input_size(input_t.sizes(), weight_t.sizes(), p.padding, p.output_padding, p.stride,
                                        p.dilation, p.groups);
  // A convolution allocates its channels-last output before its operands' contiguous copies, a
  // transposed one after.
  at::Tensor output;
  const auto allocate_output = [&] {
    if (channels_last) output = at::empty(output_sizes, input_t.options().memory_format(format));
  };
  if (op == Op::kConvolution) allocate_output();
  const at::Tensor input = input_t.contiguous(format), weight = weight_t.contiguous(format);
  if (op == Op::kDeconvolution) allocate_output();
  const at::ScalarType dtype = input.scalar_type();
  const Primitive pd = Primitive::ConvForward(
      Query(input.sizes().vec(), dtype, channels_last),
      MemoryDesc::Any(WeightDims(weight.sizes(), p.groups, op), dtype),
      bias.defined() ? MemoryDesc::Any(bias.sizes().vec(), dtype) : MemoryDesc(),
      Query(output_sizes, dtype, channels_last), p.stride, p.OnednnDilates(), p.padding, p.PaddingR(),
      /*user_scratchpad=*/true, op);
  at::Tensor scratchpad = Block(pd.Bytes(Arg::kScratchpad), input);
  at::Tensor src = ReorderIfDiffer(PlainDesc(input), pd.Desc(Arg::kSrc), input);
  at::Tensor weights = ReorderIfDiffer(WeightDesc(weight, p.groups, op), pd.Desc(Arg::kWeights), input);
  const MemoryDesc dst_desc = pd.Desc(Arg::kDst);
  at::Tensor dst;
  if (!channels_last) {
    dst = Block(dst_desc.bytes(), input);
  } else if (PlainDesc(output) != dst_desc) {
    at::Tensor expected_dst = Block(dst_desc.bytes(), input);
    ReorderScratchpad(dst_desc, PlainDesc(output), input);
  }
  weights.reset();
  src.reset();
  scratchpad.reset();
  if (channels_last) return output;
  at::Tensor dense = ToDense(dst_desc, output_sizes, input);
  dst.reset();
  return dense;
}

// mkldnn_convolution(_transpose)_backward: grad_output, input and weight contiguous in the
// convolution's format, then grad_input, then grad_weight and grad_bias.
std::tuple<at::Tensor, at::Tensor, at::Tensor> MkldnnBackward(const at::Tensor& input_t,
                                                              const at::Tensor& grad_output_t,
                                                              const at::Tensor& weight_t, const ConvParams& p,
                                                              std::array<bool, 3> mask, Op op) {
  at::MemoryFormat format;
  const bool channels_last = ChannelsLast(input_t, weight_t, &format);
  const at::Tensor grad_output = grad_output_t.contiguous(format);
  const at::Tensor input = input_t.contiguous(format), weight = weight_t.contiguous(format);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) grad_input = MkldnnBackwardInput(input.sizes(), grad_output, weight, p, channels_last, format, op);
  if (mask[1] || mask[2]) {
    std::tie(grad_weight, grad_bias) =
        MkldnnBackwardWeights(weight.sizes(), grad_output, input, p, mask[2], channels_last, format, op);
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

at::Tensor MkldnnConvolution(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                             const ConvParams& p) {
  return MkldnnForward(input, weight, bias, p, p.transposed ? Op::kDeconvolution : Op::kConvolution);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> MkldnnConvolutionBackward(const at::Tensor& input,
                                                                         const at::Tensor& grad_output,
                                                                         const at::Tensor& weight, const ConvParams& p,
                                                                         std::array<bool, 3> mask) {
  return MkldnnBackward(input, grad_output, weight, p, mask, p.transposed ? Op::kDeconvolution : Op::kConvolution);
}

}  // namespace oomguard::meta_kernels
