// Lets a TorchScript module's nn.MultiheadAttention and nn.TransformerEncoderLayer take PyTorch's fused
// fast path on meta where cpu takes it, so that the meta run calls the ops cpu calls.
//
//   if (options.device().is_meta()) unrewritten = LetMetaTakeTheFastPath(module);  // before any forward
//
// Note [Meta takes the attention fast path]: in evaluation under no_grad, nn.MultiheadAttention.forward
// calls aten::_native_multi_head_attention and nn.TransformerEncoderLayer.forward
// aten::_transformer_encoder_layer_fwd, but only for tensors whose device type is in a list the module
// spells out (["cpu", "cuda", <privateuse1>], and "xpu" for the layer: torch/nn/modules/activation.py's
// _check_arg_device, transformer.py's _supported_device_type). torch.jit.script compiles that list into
// the graph as a prim::ListConstruct of string constants, which aten::__contains__ reads; on meta the
// check fails and the module runs its Python path, with other ops and other bytes than cpu's fused
// kernel. Before the first forward (the graph executor copies a graph when it first runs it) this adds
// "meta" to every such list in the graphs that call one of the two fused ops (the two classes'
// forwards) and in the functions those call directly. Every other condition of the fast path
// (training, grad mode, masks, dtypes, even heads) stays as PyTorch wrote it, so meta takes the fast
// path exactly where cpu does; the fused ops' Meta kernels (backends/meta/kernels/meta_kernels_transformer.cpp)
// then allocate what cpu's allocate. The rewrite changes this load's graphs only, which a meta run owns.
#pragma once

#include <string>
#include <vector>

namespace torch::jit {
struct Module;
}

namespace oomguard {

struct FastPathNotFound {
  std::string op;      // "aten::_native_multi_head_attention": the fused op the module's forward calls
  std::string module;  // "attention": its name in the module tree ("" for the top module)
};

// Rewrites the forwards of `module` and its submodules that call a fused op (Note [Meta takes the
// attention fast path]). Returns those of them where no device list was found (a class scripted by
// another PyTorch version may check the device otherwise): meta may still take another path there.
// Idempotent.
std::vector<FastPathNotFound> LetMetaTakeTheFastPath(const torch::jit::Module& module);

}  // namespace oomguard
