// Composite layers: self-attention, the MLP block and the pre-norm transformer block.
#include <cmath>

#include "base/check.h"
#include "nn/layers/layers.h"

namespace oomguard {

at::Tensor SelfAttention(const at::Tensor& x, const at::Tensor& qkv_weight, const at::Tensor& out_weight, int64_t heads,
                         bool causal, double dropout_p, bool training, const std::string& implementation) {
  const int64_t batch = x.size(0), seq = x.size(1), dim = x.size(2), head_dim = dim / heads;
  // [batch, seq, 3*dim] -> 3 x [batch, heads, seq, head_dim]
  std::vector<at::Tensor> qkv = at::linear(x, qkv_weight).view({batch, seq, 3, heads, head_dim}).unbind(2);
  at::Tensor q = qkv[0].transpose(1, 2), k = qkv[1].transpose(1, 2), v = qkv[2].transpose(1, 2);
  if (implementation == "flash") {
    OOMGUARD_CHECK(dropout_p == 0) << "attention \"flash\" takes no dropout (the loader should have said so)";
    const at::Tensor out = x.is_cuda()
                               ? std::get<0>(at::_scaled_dot_product_flash_attention(q, k, v, 0.0, causal))
                               : std::get<0>(at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal));
    return at::linear(out.transpose(1, 2).reshape({batch, seq, dim}), out_weight);
  }
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul(1.0 / std::sqrt(static_cast<double>(head_dim)));
  if (causal) {
    at::Tensor mask = at::ones({seq, seq}, x.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  }
  at::Tensor attention = at::dropout(at::softmax(scores, -1), dropout_p, training);
  at::Tensor context = at::matmul(attention, v).transpose(1, 2).reshape({batch, seq, dim});
  return at::linear(context, out_weight);
}

namespace {

at::Tensor Activate(const std::string& activation, const at::Tensor& x) {
  return activation == "relu" ? at::relu(x) : at::gelu(x);
}

class Attention final : public Layer {
 public:
  Attention(const LayerSpec& s, const at::TensorOptions& o, std::string name)
      : Layer(std::move(name)), heads_(s.heads), causal_(s.causal), p_(s.p), implementation_(s.attention) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(s.dim));
    qkv_ = AddParameter({3 * s.dim, s.dim}, o, bound);
    out_ = AddParameter({s.dim, s.dim}, o, bound);
  }
  at::Tensor Forward(const at::Tensor& x, bool training) override {
    return SelfAttention(x, qkv_, out_, heads_, causal_, p_, training, implementation_);
  }

 private:
  int64_t heads_;
  bool causal_;
  double p_;
  std::string implementation_;
  at::Tensor qkv_, out_;
};

class MlpBlock final : public Layer {
 public:
  MlpBlock(const LayerSpec& s, const at::TensorOptions& o, std::string name)
      : Layer(std::move(name)), activation_(s.activation) {
    up_ = AddParameter({s.hidden, s.dim}, o, 1.0 / std::sqrt(static_cast<double>(s.dim)));
    up_bias_ = AddParameter({s.hidden}, o, 1.0 / std::sqrt(static_cast<double>(s.dim)));
    down_ = AddParameter({s.dim, s.hidden}, o, 1.0 / std::sqrt(static_cast<double>(s.hidden)));
    down_bias_ = AddParameter({s.dim}, o, 1.0 / std::sqrt(static_cast<double>(s.hidden)));
  }
  at::Tensor Forward(const at::Tensor& x, bool) override {
    return at::linear(Activate(activation_, at::linear(x, up_, up_bias_)), down_, down_bias_);
  }

 private:
  std::string activation_;
  at::Tensor up_, up_bias_, down_, down_bias_;
};

// Pre-norm: x + attn(ln1(x)), then h + mlp(ln2(h)), with dropout p on both residual branches.
class TransformerBlock final : public Layer {
 public:
  TransformerBlock(const LayerSpec& s, const at::TensorOptions& o, std::string name)
      : Layer(std::move(name)),
        dim_(s.dim),
        heads_(s.heads),
        causal_(s.causal),
        p_(s.p),
        activation_(s.activation),
        implementation_(s.attention) {
    ln1_w_ = AddParameter({s.dim}, o, 0);
    ln1_b_ = AddParameter({s.dim}, o, 0);
    const double bound = 1.0 / std::sqrt(static_cast<double>(s.dim));
    qkv_ = AddParameter({3 * s.dim, s.dim}, o, bound);
    out_ = AddParameter({s.dim, s.dim}, o, bound);
    ln2_w_ = AddParameter({s.dim}, o, 0);
    ln2_b_ = AddParameter({s.dim}, o, 0);
    up_ = AddParameter({s.hidden, s.dim}, o, bound);
    down_ = AddParameter({s.dim, s.hidden}, o, 1.0 / std::sqrt(static_cast<double>(s.hidden)));
    if (!o.device().is_meta()) {
      at::NoGradGuard no_grad;
      ln1_b_.zero_();
      ln2_b_.zero_();
    }
  }
  at::Tensor Forward(const at::Tensor& x, bool training) override {
    at::Tensor attn = SelfAttention(at::layer_norm(x, {dim_}, ln1_w_, ln1_b_), qkv_, out_, heads_, causal_, p_,
                                    training, implementation_);
    at::Tensor h = x + at::dropout(attn, p_, training);
    at::Tensor mlp =
        at::linear(Activate(activation_, at::linear(at::layer_norm(h, {dim_}, ln2_w_, ln2_b_), up_)), down_);
    return h + at::dropout(mlp, p_, training);
  }

 private:
  int64_t dim_, heads_;
  bool causal_;
  double p_;
  std::string activation_;
  std::string implementation_;
  at::Tensor ln1_w_, ln1_b_, qkv_, out_, ln2_w_, ln2_b_, up_, down_;
};

}  // namespace

const std::vector<LayerFactoryEntry>& BlockLayerFactories() {
  static const std::vector<LayerFactoryEntry> factories = {
      {"attention", New<Attention>},
      {"mlp_block", New<MlpBlock>},
      {"transformer_block", New<TransformerBlock>},
  };
  return factories;
}

at::Tensor Layer::AddParameter(at::IntArrayRef sizes, const at::TensorOptions& options, double bound) {
  at::Tensor p = at::empty(sizes, options);
  if (!options.device().is_meta()) {
    if (bound > 0) {
      p.uniform_(-bound, bound);
    } else {
      p.fill_(1.0);
    }
  }
  p.set_requires_grad(true);
  parameters_.push_back(p);
  return p;
}

std::vector<LayerFactoryEntry> LayerFactories() {
  std::vector<LayerFactoryEntry> all = BasicLayerFactories();
  all.insert(all.end(), BlockLayerFactories().begin(), BlockLayerFactories().end());
  return all;
}

std::unique_ptr<Layer> MakeLayer(const LayerSpec& spec, const at::TensorOptions& options, std::string name) {
  for (const auto* list : {&BasicLayerFactories(), &BlockLayerFactories()}) {
    for (const LayerFactoryEntry& entry : *list) {
      if (entry.kind == spec.kind) return entry.make(spec, options, std::move(name));
    }
  }
  OOMGUARD_CHECK(false) << "unknown layer kind '" << spec.kind << "' (the loader should have rejected it)";
}

}  // namespace oomguard
