// Single-op layers: linear, activations (silu among them), dropout, scale, layer_norm, embedding.
#include <cmath>

#include "base/check.h"
#include "nn/layers/layers.h"

namespace oomguard {
namespace {

class Linear final : public Layer {
 public:
  Linear(const LayerSpec& s, const at::TensorOptions& o, std::string name) : Layer(std::move(name)) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(s.in));
    weight_ = AddParameter({s.out, s.in}, o, bound);
    if (s.bias) bias_ = AddParameter({s.out}, o, bound);
  }
  at::Tensor Forward(const at::Tensor& x, bool) override { return at::linear(x, weight_, bias_); }

 private:
  at::Tensor weight_, bias_;
};

// Elementwise activations; `inplace` uses the trailing-underscore op where ATen has one.
class Activation final : public Layer {
 public:
  Activation(const LayerSpec& s, const at::TensorOptions&, std::string name)
      : Layer(std::move(name)), kind_(s.kind), inplace_(s.inplace) {}
  at::Tensor Forward(const at::Tensor& x, bool) override {
    // In-place methods modify the storage x shares with its producer; the handle itself stays const.
    if (kind_ == "relu") return inplace_ ? x.relu_() : at::relu(x);
    if (kind_ == "gelu") {
      at::Tensor y = x;
      return inplace_ ? at::gelu_(y) : at::gelu(x);
    }
    if (kind_ == "sigmoid") return inplace_ ? x.sigmoid_() : at::sigmoid(x);
    if (kind_ == "tanh") return inplace_ ? x.tanh_() : at::tanh(x);
    OOMGUARD_CHECK(kind_ == "exp") << "Activation has no kind '" << kind_ << "': give it a branch or a class";
    return inplace_ ? x.exp_() : at::exp(x);
  }

 private:
  std::string kind_;
  bool inplace_;
};

// x * sigmoid(x); autograd saves its input for backward (silu_backward takes grad_output and self).
class Silu final : public Layer {
 public:
  Silu(const LayerSpec&, const at::TensorOptions&, std::string name) : Layer(std::move(name)) {}
  at::Tensor Forward(const at::Tensor& x, bool) override { return at::silu(x); }
};

class Dropout final : public Layer {
 public:
  Dropout(const LayerSpec& s, const at::TensorOptions&, std::string name)
      : Layer(std::move(name)), p_(s.p), inplace_(s.inplace) {}
  at::Tensor Forward(const at::Tensor& x, bool training) override {
    if (!inplace_) return at::dropout(x, p_, training);
    at::Tensor y = x;  // a second handle to the same storage: at::dropout_ takes a non-const one
    return at::dropout_(y, p_, training);
  }

 private:
  double p_;
  bool inplace_;
};

class Scale final : public Layer {
 public:
  Scale(const LayerSpec& s, const at::TensorOptions&, std::string name)
      : Layer(std::move(name)), factor_(s.factor), inplace_(s.inplace) {}
  at::Tensor Forward(const at::Tensor& x, bool) override { return inplace_ ? x.mul_(factor_) : x.mul(factor_); }

 private:
  double factor_;
  bool inplace_;
};

class LayerNorm final : public Layer {
 public:
  LayerNorm(const LayerSpec& s, const at::TensorOptions& o, std::string name) : Layer(std::move(name)), dim_(s.dim) {
    weight_ = AddParameter({s.dim}, o, 0);
    bias_ = AddParameter({s.dim}, o, 0);
    if (!o.device().is_meta()) {
      at::NoGradGuard no_grad;
      bias_.zero_();
    }
  }
  at::Tensor Forward(const at::Tensor& x, bool) override { return at::layer_norm(x, {dim_}, weight_, bias_); }

 private:
  int64_t dim_;
  at::Tensor weight_, bias_;
};

class Embedding final : public Layer {
 public:
  Embedding(const LayerSpec& s, const at::TensorOptions& o, std::string name) : Layer(std::move(name)) {
    weight_ = AddParameter({s.vocab, s.dim}, o, 1.0);
  }
  at::Tensor Forward(const at::Tensor& ids, bool) override { return at::embedding(weight_, ids); }

 private:
  at::Tensor weight_;
};

}  // namespace

const std::vector<LayerFactoryEntry>& BasicLayerFactories() {
  // clang-format off: one line per kind, so adding one is one line
  static const std::vector<LayerFactoryEntry> factories = {
      {"linear", New<Linear>},       {"relu", New<Activation>},
      {"gelu", New<Activation>},     {"sigmoid", New<Activation>},
      {"tanh", New<Activation>},     {"exp", New<Activation>},
      {"silu", New<Silu>},           {"dropout", New<Dropout>},
      {"scale", New<Scale>},         {"layer_norm", New<LayerNorm>},
      {"embedding", New<Embedding>},
  };
  // clang-format on
  return factories;
}

}  // namespace oomguard
