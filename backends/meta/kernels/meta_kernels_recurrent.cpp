// The recurrent ops on meta, said as they run: PyTorch's own composite (RNN.cpp's per-step path for a
// tensor that is neither cpu's nor CUDA's), after a note that the run called it (Note [Unmirrored ops are
// said as they run], backends/meta/kernel_target.h). Registered for Meta and AutogradMeta, where the
// composite would have run, so that nothing watches every operator to see them.
#include <ATen/ATen.h>
#include <ATen/ops/gru_native.h>
#include <ATen/ops/lstm_native.h>
#include <ATen/ops/rnn_relu_native.h>
#include <ATen/ops/rnn_tanh_native.h>
#include <torch/library.h>

#include <tuple>

#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels_internal.h"

namespace oomguard::meta_kernels {
namespace {

using Three = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using Two = std::tuple<at::Tensor, at::Tensor>;

Three LstmInput(const at::Tensor& input, at::TensorList hx, at::TensorList params, bool has_biases,
                int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first) {
  NoteUnmirroredOp("aten::lstm");
  return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
}
Three LstmData(const at::Tensor& data, const at::Tensor& batch_sizes, at::TensorList hx, at::TensorList params,
               bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional) {
  NoteUnmirroredOp("aten::lstm");
  return at::native::lstm(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional);
}

// gru, rnn_tanh and rnn_relu share their two signatures.
template <const char* kName, Two (*kInput)(const at::Tensor&, const at::Tensor&, at::TensorList, bool, int64_t,
                                           double, bool, bool, bool)>
Two OneHiddenInput(const at::Tensor& input, const at::Tensor& hx, at::TensorList params, bool has_biases,
                   int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first) {
  NoteUnmirroredOp(kName);
  return kInput(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
}
template <const char* kName, Two (*kData)(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::TensorList,
                                          bool, int64_t, double, bool, bool)>
Two OneHiddenData(const at::Tensor& data, const at::Tensor& batch_sizes, const at::Tensor& hx, at::TensorList params,
                  bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional) {
  NoteUnmirroredOp(kName);
  return kData(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional);
}

constexpr char kGru[] = "aten::gru";
constexpr char kRnnTanh[] = "aten::rnn_tanh";
constexpr char kRnnRelu[] = "aten::rnn_relu";

void RegisterOn(torch::Library& lib) {
  lib.impl("lstm.input", TORCH_FN(LstmInput));
  lib.impl("lstm.data", TORCH_FN(LstmData));
  lib.impl("gru.input", TORCH_FN((OneHiddenInput<kGru, at::native::gru>)));
  lib.impl("gru.data", TORCH_FN((OneHiddenData<kGru, at::native::gru>)));
  lib.impl("rnn_tanh.input", TORCH_FN((OneHiddenInput<kRnnTanh, at::native::rnn_tanh>)));
  lib.impl("rnn_tanh.data", TORCH_FN((OneHiddenData<kRnnTanh, at::native::rnn_tanh>)));
  lib.impl("rnn_relu.input", TORCH_FN((OneHiddenInput<kRnnRelu, at::native::rnn_relu>)));
  lib.impl("rnn_relu.data", TORCH_FN((OneHiddenData<kRnnRelu, at::native::rnn_relu>)));
}

}  // namespace

void RegisterRecurrent(torch::Library& meta, torch::Library& autograd_meta) {
  RegisterOn(meta);
  RegisterOn(autograd_meta);
}

}  // namespace oomguard::meta_kernels
