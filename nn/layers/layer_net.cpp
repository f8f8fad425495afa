#include "nn/layers/layer_net.h"

#include "base/check.h"

namespace oomguard {

LayerNet::LayerNet(const ModelSpec& spec, const at::TensorOptions& options) {
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    layers_.push_back(MakeLayer(spec.layers[i], options, std::to_string(i) + ":" + spec.layers[i].kind));
  }
}

std::string LayerNet::segment_name(size_t i) const {
  OOMGUARD_CHECK(i < layers_.size()) << "segment " << i << " of " << layers_.size();
  return layers_[i]->name();
}

std::vector<at::Tensor> LayerNet::segment_parameters(size_t begin, size_t end) const {
  OOMGUARD_CHECK(begin <= end && end <= layers_.size())
      << "segments [" << begin << ", " << end << ") of " << layers_.size();
  std::vector<at::Tensor> out;
  for (size_t i = begin; i < end; ++i) {
    for (const at::Tensor& p : layers_[i]->parameters()) out.push_back(p);
  }
  return out;
}

at::Tensor LayerNet::ForwardSegments(at::Tensor x, size_t begin, size_t end, bool training,
                                     const AfterSegment& after_segment) {
  OOMGUARD_CHECK(begin <= end && end <= layers_.size())
      << "segments [" << begin << ", " << end << ") of " << layers_.size();
  for (size_t i = begin; i < end; ++i) {
    if (trace()) trace()->EnterLayer(layers_[i]->name());
    x = layers_[i]->Forward(x, training);
    if (trace()) trace()->Exit();
    if (after_segment) x = after_segment(i, std::move(x));
  }
  return x;
}

}  // namespace oomguard
