// Layers: the building blocks scenario models are made of, with parameters created directly on the
// target device (LibTorch's Module::to(kMeta) cannot move modules to meta, and the meta backend needs
// parameters born there).
//
//   auto layer = oomguard::MakeLayer(spec, at::TensorOptions().device(at::kCPU).dtype(at::kFloat), "1:linear");
//   at::Tensor y = layer->Forward(x, /*training=*/true);
//
// Forward uses ATen ops only, so autograd records them exactly as it would for torch::nn modules.
// Parameters are initialised from ATen's default generator (seed it first); on meta they have no data.
// Adding a layer kind: its row in model/layer_kinds.h (fields, flags, feature rule; how to add one is
// written there), one class in layers_basic.cpp or layers_blocks.cpp, and one line naming it in that
// file's factory list. MakeLayer finds the factory by the kind's name; a test checks that every row
// of LayerKinds() has exactly one factory and every factory a row.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/scenario.h"

namespace oomguard {

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;

  virtual at::Tensor Forward(const at::Tensor& x, bool training) = 0;
  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  const std::string& name() const { return name_; }

 protected:
  // A leaf that requires grad, shaped `sizes`, uniform in [-bound, bound] (ones when bound is 0).
  at::Tensor AddParameter(at::IntArrayRef sizes, const at::TensorOptions& options, double bound);

 private:
  std::string name_;
  std::vector<at::Tensor> parameters_;
};

// Builds one layer. The spec was validated by the loader; unknown kinds are a programmer error.
std::unique_ptr<Layer> MakeLayer(const LayerSpec& spec, const at::TensorOptions& options, std::string name);

// How a kind is built: every layer class has this constructor.
using LayerFactory = std::unique_ptr<Layer> (*)(const LayerSpec&, const at::TensorOptions&, std::string);
struct LayerFactoryEntry {
  std::string_view kind;  // a LayerKinds() row's name
  LayerFactory make;
};

template <typename L>
std::unique_ptr<Layer> New(const LayerSpec& spec, const at::TensorOptions& options, std::string name) {
  return std::make_unique<L>(spec, options, std::move(name));
}

// The kinds built in layers_basic.cpp / layers_blocks.cpp, and both lists together (MakeLayer's).
const std::vector<LayerFactoryEntry>& BasicLayerFactories();
const std::vector<LayerFactoryEntry>& BlockLayerFactories();
std::vector<LayerFactoryEntry> LayerFactories();

// Multi-head self-attention. The implementation is the scenario's explicit choice, never the
// dispatcher's, so cpu, meta and cuda keep the same tensors for backward:
// - "math": q k^T / sqrt(d), softmax, dropout, @ v as separate ops; keeps the [batch, heads, seq, seq]
//   scores and probabilities;
// - "flash": the fused flash-attention kernel (_scaled_dot_product_flash_attention_for_cpu on cpu and
//   meta, _scaled_dot_product_flash_attention on cuda); keeps the output and a [batch, heads, seq]
//   logsumexp only. No dropout inside (the loader rejects p > 0).
at::Tensor SelfAttention(const at::Tensor& x, const at::Tensor& qkv_weight, const at::Tensor& out_weight, int64_t heads,
                         bool causal, double dropout_p, bool training, const std::string& implementation);

}  // namespace oomguard
