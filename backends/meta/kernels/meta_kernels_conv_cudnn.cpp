// A card's cuDNN convolutions on meta (`--kernels cuda`, Note [Meta as a card]): the convolution Meta
// kernels' (backends/meta/kernels/meta_kernels_conv.cpp) branch for a card's kernels.
#include "backends/meta/kernels/meta_kernels_conv_cudnn.h"

#include <ATen/ATen.h>
#include <ATen/native/ConvUtils.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "allocators/install.h"
#include "allocators/ledger.h"
#include "backends/meta/kernel_target.h"

namespace oomguard::meta_kernels {
namespace {

// Note [cuDNN's convolution workspace on a card]
// A CUDA convolution runs cuDNN (Convolution.cpp's select_conv_backend: Cudnn / CudnnTranspose for
// float, half and bfloat16; CudaDepthwise2d's thnn_conv_depthwise2d allocates only its output too). Its
// tensors are the output (and in backward grad_input and grad_weight) in cudnn_conv_suggest_memory_format's
// format, after contiguous copies of the operands in it; no oneDNN buffers, no im2col columns. These are
// booked. cuDNN's workspace is not, and by PyTorch 2.11's source (aten/src/ATen/native/cudnn/Conv_v8.cpp,
// the path every cuDNN convolution takes unless TORCH_CUDNN_V8_API_DISABLED=1) it need not be for the
// verdict, though its size cannot be known without cuDNN and the card:
// - one workspace per cuDNN call (forward; backward data and backward filter are separate calls, run one
//   after the other), taken from the caching allocator and freed when the call returns. run_conv_plan:
//     auto workspace_size = plan.getWorkspaceSize();
//     auto workspace_ptr = c10::cuda::CUDACachingAllocator::get()->allocate(workspace_size);
//   workspace_ptr is a DataPtr local to run_conv_plan.
// - the workspace never raises an out-of-memory error: with cudnn.benchmark off (the default),
//   run_single_conv tries the cached plan, then the top heuristic config, then all heuristic configs,
//   then cuDNN's fallback list, and try_configs goes on to the next config when the allocator refuses:
//     } catch (c10::OutOfMemoryError&) {
//       std::ignore = cudaGetLastError(); // clear CUDA error
//     }
//   Only when no config's workspace fits does it fail, and then not with an OOM but
//   "GET was unable to find an engine to execute this computation". With cudnn.benchmark on,
//   generate_and_filter_plans keeps the plans whose workspace is at most get_available_workspace()
//   (CUDACachingAllocator::cacheInfo: the largest cached free block, or cudaMemGetInfo's free bytes when
//   larger) and allocates the largest, halving it on an OutOfMemoryError
//   ("max_workspace_size /= 2;") and dropping the plans that no longer fit; after the timing it empties
//   the cache (_cudnn_get_conv_benchmark_empty_cache(), true by default). Conv_v7.cpp's cudnnFind path
//   (getMaxWorkspaceSize) likewise skips an algorithm whose workspace exceeds cacheInfo's largest block.
// - so the bound: a convolution's workspace is at most the cap's headroom at that call (the caching
//   allocator gives nothing past the cap, after releasing its cached segments), and nothing else is
//   known of it. A verdict that the booked tensors fit stands (cuDNN then runs an engine whose workspace
//   fits, perhaps a slower one) unless no engine's does (the error above), and one that they do not is
//   the card's too. What it can change is the reserved bytes after the call: a workspace that needed a
//   new segment leaves it cached, and a later request the allocator serves from that segment keeps it
//   from being released.
// CUDNN_CONV_WSCAP_DBG (a cap cuDNN itself reads, listed in PyTorch's CUDA environment variables) is
// not in PyTorch's source: no number is taken from it. The run's warnings say this once, and under a
// cap with the least headroom a cuDNN call had (the cap less the tensors live while it runs: after its
// output, and in backward after grad_input for the backward-data call and after grad_weight for the
// backward-filter call, which PyTorch runs in that order), an upper bound on every workspace of the run
// (the caching allocator's rounding and the cuBLAS workspaces only lower it). tests/card_conv_test.cpp
// asserts the text.
constexpr const char* kCudnnWorkspaceWarning =
    "aten::convolution: cuDNN's workspace is not booked: PyTorch takes it from the caching allocator while each "
    "convolution runs and frees it when the convolution returns, and skips an engine whose workspace the "
    "allocator refuses (Conv_v8.cpp's try_configs), so it raises no out-of-memory error of its own; it is at most "
    "the cap's headroom at the convolution, and a segment made for it stays reserved in the allocator's cache";
constexpr const char* kCudnnWorkspaceBoundWarning =
    "aten::convolution: cuDNN's workspace is not booked: PyTorch takes it from the caching allocator while each "
    "convolution runs and frees it when the convolution returns, and skips an engine whose workspace the "
    "allocator refuses (Conv_v8.cpp's try_configs), so it raises no out-of-memory error of its own; it is at most "
    "the cap's headroom at the convolution, {bytes} at the tightest (the cap less the tensors live there), and a "
    "segment made for it stays reserved in the allocator's cache";

// The warning, with the headroom of the cuDNN call about to run when the meta ledger has a cap.
void NoteWorkspaceBound() {
  const int64_t cap = MetaAccount().limits().cap_bytes;
  if (cap == Ledger::kUnlimited) {
    NoteKernelWarning(kCudnnWorkspaceWarning);
    return;
  }
  NoteKernelWarningLeastBytes(kCudnnWorkspaceBoundWarning,
                              std::max<int64_t>(0, cap - MetaAccount().ledger().live_bytes()));
}

}  // namespace

// cudnn_conv_suggest_memory_format (ConvUtils.h): channels last when either operand is, else contiguous.
at::MemoryFormat CudnnFormat(const at::Tensor& input, const at::Tensor& weight) {
  if (input.scalar_type() == at::kDouble || weight.scalar_type() == at::kDouble) return at::MemoryFormat::Contiguous;
  return input.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
                 weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast
             ? at::MemoryFormat::ChannelsLast
             : at::MemoryFormat::Contiguous;
}

// _convolution's Cudnn branch: input and weight contiguous in the format, then cudnn_convolution's
// output (cudnn_convolution_transpose's for a transposed one, shaped by conv_input_size); the bias is
// added in place.
at::Tensor CudnnForward(const at::Tensor& input, const at::Tensor& weight, const ConvParams& p) {
  const at::MemoryFormat format = CudnnFormat(input, weight);
  const at::Tensor input_c = input.contiguous(format), weight_c = weight.contiguous(format);
  const std::vector<int64_t> sizes =
      p.transposed ? at::native::conv_input_size(input_c.sizes(), weight_c.sizes(), p.padding, p.output_padding,
                                                 p.stride, p.dilation, p.groups)
                   : at::native::conv_output_size(input_c.sizes(), weight_c.sizes(), p.padding, p.stride, p.dilation);
  at::Tensor output = at::empty(sizes, input_c.options().memory_format(format));
  NoteWorkspaceBound();
  return output;
}

// convolution_backward's Cudnn branch: grad_output, input and weight contiguous in the format, then
// grad_input and grad_weight in it; the bias gradient is summed from grad_output after.
std::tuple<at::Tensor, at::Tensor, at::Tensor> CudnnBackward(const at::Tensor& grad_output, const at::Tensor& input,
                                                             const at::Tensor& weight, std::array<bool, 3> mask) {
  const at::MemoryFormat format = CudnnFormat(input, weight);
  const at::Tensor grad_output_c = grad_output.contiguous(format);
  const at::Tensor input_c = input.contiguous(format), weight_c = weight.contiguous(format);
  at::Tensor grad_input, grad_weight;
  if (mask[0]) {
    grad_input = at::empty(input_c.sizes(), input_c.options().memory_format(format));
    NoteWorkspaceBound();
  }
  if (mask[1]) {
    grad_weight = at::empty(weight_c.sizes(), weight_c.options().memory_format(format));
    NoteWorkspaceBound();
  }
  return {grad_input, grad_weight, at::Tensor()};
}

}  // namespace oomguard::meta_kernels
