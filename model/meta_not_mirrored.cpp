#include "model/meta_not_mirrored.h"

namespace oomguard {

const std::vector<NotMirroredOp>& NotMirroredOps() {
  static const std::string per_step = "runs on meta through PyTorch's native per-step path, while cpu ";
  static const std::string precomputed =
      per_step + "computes every step's input projection at once (RNN.cpp's FullLayer on a cpu tensor)";
  static const auto* ops = new std::vector<NotMirroredOp>{
      {"aten::lstm", per_step + "runs oneDNN's LSTM (mkldnn_rnn_layer, with its workspace)"},
      {"aten::gru", precomputed},
      {"aten::rnn_tanh", precomputed},
      {"aten::rnn_relu", precomputed},
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
