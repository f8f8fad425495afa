#include "model/meta_not_mirrored.h"

namespace oomguard {

const std::vector<NotMirroredOp>& NotMirroredOps() {
  static const std::string per_step = "runs on meta through PyTorch's native per-step path, while cpu ";
  static const std::string precomputed =
      per_step + "computes every step's input projection at once (RNN.cpp's FullLayer on a cpu tensor)";
  // nn.MultiheadAttention's and nn.TransformerEncoderLayer's forwards take PyTorch's fused fast path only
  // for tensors whose device is cpu or cuda (torch/nn/modules/activation.py, transformer.py): meta runs
  // the Python path, cpu the fused kernel, whose buffers meta has no mirror for.
  static const std::string fast_path =
      " fused fast path, which cpu takes in evaluation with autograd off (no_grad) while meta runs the module's "
      "Python path there (the fast path accepts cpu and cuda tensors only)";
  static const auto* ops = new std::vector<NotMirroredOp>{
      {"aten::lstm", per_step + "runs oneDNN's LSTM (mkldnn_rnn_layer, with its workspace)"},
      {"aten::gru", precomputed},
      {"aten::rnn_tanh", precomputed},
      {"aten::rnn_relu", precomputed},
      {"aten::_native_multi_head_attention", "is nn.MultiheadAttention's" + fast_path},
      {"aten::_transformer_encoder_layer_fwd", "is nn.TransformerEncoderLayer's" + fast_path},
  };
  return *ops;
}

std::string NotMirroredConsequence() {
  return "which meta does not mirror yet: its bytes on meta are not cpu's. Run it on cpu for exact bytes";
}

std::string NotMirroredAdvice() { return "Run this scenario with --backend cpu for its bytes"; }

std::string NotMirroredMessage(const std::string& what, const std::string& why) {
  return what + kNotMirroredMarker + why + ". " + NotMirroredAdvice();
}

}  // namespace oomguard
