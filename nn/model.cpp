#include "nn/model.h"

namespace oomguard {

Model::Model(const ModelSpec& spec, const at::TensorOptions& options) {
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    layers_.push_back(MakeLayer(spec.layers[i], options, std::to_string(i) + ":" + spec.layers[i].kind));
  }
}

std::vector<at::Tensor> Model::parameters() const { return parameters(0, layers_.size()); }

std::vector<at::Tensor> Model::parameters(size_t begin, size_t end) const {
  std::vector<at::Tensor> out;
  for (size_t i = begin; i < end; ++i) {
    for (const at::Tensor& p : layers_[i]->parameters()) out.push_back(p);
  }
  return out;
}

at::Tensor Model::Forward(at::Tensor x, size_t begin, size_t end, bool training, const AfterLayer& after_layer) const {
  for (size_t i = begin; i < end; ++i) {
    if (trace_) trace_->EnterLayer(layers_[i]->name());
    x = layers_[i]->Forward(x, training);
    if (trace_) trace_->Exit();
    if (after_layer) x = after_layer(i, std::move(x));
  }
  return x;
}

}  // namespace oomguard
