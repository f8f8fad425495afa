#include "model/meta_not_mirrored.h"

namespace oomguard {

const std::vector<NotMirroredOp>& NotMirroredOps() {
  static const std::string per_step = "runs on meta through PyTorch's native per-step path, while cpu ";
  static const std::string precomputed =
      per_step + "computes every step's input projection at once (RNN.cpp's FullLayer on a cpu tensor)";
  // A CUDA tensor's recurrent op runs cuDNN's RNN when cuDNN is enabled (RNN.cpp's use_cudnn; _cudnn_rnn in
  // cudnn/RNN.cpp): a flat weight buffer, and in training a reserve space kept for the backward, both sized by
  // cuDNN on the card.
  static const std::string cudnn =
      "runs on meta through PyTorch's native per-step path, while a card runs cuDNN's RNN (_cudnn_rnn: its "
      "weights copied into one flat buffer, and in training a reserve space kept for the backward, sized by "
      "cuDNN on the card)";
  static const auto* ops = new std::vector<NotMirroredOp>{
      {"aten::lstm", per_step + "runs oneDNN's LSTM (mkldnn_rnn_layer, with its workspace)", cudnn},
      {"aten::gru", precomputed, cudnn},
      {"aten::rnn_tanh", precomputed, cudnn},
      {"aten::rnn_relu", precomputed, cudnn},
  };
  return *ops;
}

std::string NotMirroredConsequence() {
  return "which meta does not mirror yet: its bytes on meta are not cpu's. Run it on cpu for exact bytes";
}

std::string NotMirroredOnACard() {
  return "which card mode does not model: its bytes on meta are not the card's";
}

std::string NotMirroredAdvice() { return "Run this scenario with --backend cpu for its bytes"; }

std::string NotMirroredMessage(const std::string& what, const std::string& why) {
  return what + kNotMirroredMarker + why + ". " + NotMirroredAdvice();
}

}  // namespace oomguard
