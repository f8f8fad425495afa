// LayerNet: the Net of a scenario's layer list (ModelSpec.layers, source "layers"), built on one
// device; each layer is a segment, named "<index>:<kind>".
//
//   oomguard::LayerNet net(spec.model, at::TensorOptions().device(at::kMeta).dtype(at::kFloat));
//   at::Tensor y = net.ForwardSegments(x, 0, net.segments(), /*training=*/true, nullptr);
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/scenario.h"
#include "nn/layers/layers.h"
#include "nn/net.h"

namespace oomguard {

class LayerNet : public Net {
 public:
  LayerNet(const ModelSpec& spec, const at::TensorOptions& options);

  std::vector<at::Tensor> parameters() const override { return segment_parameters(0, layers_.size()); }
  at::Tensor Forward(const at::Tensor& x, bool training) override {
    return ForwardSegments(x, 0, layers_.size(), training, nullptr);
  }

  size_t segments() const override { return layers_.size(); }
  std::string segment_name(size_t i) const override;
  std::vector<at::Tensor> segment_parameters(size_t begin, size_t end) const override;
  at::Tensor ForwardSegments(at::Tensor x, size_t begin, size_t end, bool training,
                             const AfterSegment& after_segment) override;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace oomguard
