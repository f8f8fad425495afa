// Model: a scenario's layer stack, built on one device, with a forward that lets the workload act
// between layers (pitfall knobs) and run a range of layers (checkpoint segments).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <vector>

#include "nn/layer_trace.h"
#include "nn/layers.h"

namespace oomguard {

// Called after layer `index` produced `output`; returns the tensor the next layer receives.
using AfterLayer = std::function<at::Tensor(size_t index, at::Tensor output)>;

class Model {
 public:
  Model(const ModelSpec& spec, const at::TensorOptions& options);

  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_[i]; }
  std::vector<at::Tensor> parameters() const;
  std::vector<at::Tensor> parameters(size_t begin, size_t end) const;

  // Reports each layer Forward enters, for error messages; null (the default) reports nothing.
  void set_trace(LayerTrace* trace) { trace_ = trace; }

  // Layers [begin, end) on x. after_layer may be empty.
  at::Tensor Forward(at::Tensor x, size_t begin, size_t end, bool training, const AfterLayer& after_layer) const;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  LayerTrace* trace_ = nullptr;
};

}  // namespace oomguard
