#include "model/layer_kinds.h"

#include <algorithm>

#include "base/check.h"

namespace oomguard {

const std::vector<LayerKindInfo>& LayerKinds() {
  using F = FeatureRule;
  // name, fields, required, has_parameters, attention_like, transformer_block, features
  static const std::vector<LayerKindInfo> kinds = {
      {"linear", {"in", "out", "bias"}, {"in", "out"}, true, false, false, F::kLinear},
      {"relu", {"inplace"}, {}, false, false, false, F::kKeep},
      {"gelu", {"inplace"}, {}, false, false, false, F::kKeep},
      {"sigmoid", {}, {}, false, false, false, F::kKeep},
      {"tanh", {}, {}, false, false, false, F::kKeep},
      {"exp", {}, {}, false, false, false, F::kKeep},
      {"silu", {}, {}, false, false, false, F::kKeep},
      {"dropout", {"p", "inplace"}, {}, false, false, false, F::kKeep},
      {"layer_norm", {"dim"}, {"dim"}, true, false, false, F::kDim},
      {"embedding", {"vocab", "dim"}, {"vocab", "dim"}, true, false, false, F::kEmbedding},
      {"attention", {"dim", "heads", "p", "causal", "attention"}, {"dim", "heads"}, true, true, false, F::kDim},
      {"mlp_block", {"dim", "hidden", "activation"}, {"dim", "hidden"}, true, false, false, F::kDim},
      {"transformer_block",
       {"dim", "heads", "hidden", "p", "causal", "activation", "attention"},
       {"dim", "heads", "hidden"},
       true,
       true,
       true,
       F::kDim},
      {"scale", {"factor", "inplace"}, {}, false, false, false, F::kKeep},
  };
  return kinds;
}

bool LayerKindInfo::Takes(std::string_view field) const {
  return std::find(fields.begin(), fields.end(), field) != fields.end();
}

std::vector<std::string> LayerKindNames() {
  std::vector<std::string> names;
  for (const LayerKindInfo& kind : LayerKinds()) names.push_back(kind.name);
  return names;
}

const LayerKindInfo* FindLayerKind(std::string_view name) {
  for (const LayerKindInfo& kind : LayerKinds()) {
    if (kind.name == name) return &kind;
  }
  return nullptr;
}

const LayerKindInfo& LayerKindOf(const LayerSpec& spec) {
  const LayerKindInfo* kind = FindLayerKind(spec.kind);
  OOMGUARD_CHECK(kind != nullptr) << "unknown layer kind '" << spec.kind << "' (the loader should have rejected it)";
  return *kind;
}

}  // namespace oomguard
