// The layer kinds a scenario's model is made of, declared once: one LayerKindInfo row per kind. The
// loader reads its fields (scenario/variant_json.h), the variant rules its feature rule and whether it
// has parameters (scenario/variant_rules.h), the workload and the memory estimate its flags, and
// nn/ builds it (nn/layers/layers.h); a LayerSpec names its kind by the row's `name`.
//
//   const LayerKindInfo* kind = FindLayerKind("linear");  // nullptr for an unknown kind
//   kind->Takes("bias");                                   // true
//   LayerKindOf(spec).attention_like;                      // the spec was loaded, so its kind exists
//
// Adding a layer kind:
//   1. a row in LayerKinds() (layer_kinds.cpp): its fields, required fields, flags and feature rule;
//   2. a class in nn/layers/layers_basic.cpp or nn/layers/layers_blocks.cpp, and one line naming it in that
//      file's factory list (BasicLayerFactories / BlockLayerFactories);
//   3. if it needs a field LayerSpec does not have yet: the member (model/scenario.h) and its reader
//      (LayerFields, scenario/variant_json.h); if an op has no Meta kernel, backends/meta/kernels/meta_kernels.cpp.
// A row's position is where messages list the kind ("valid values: linear, relu, ..."); the loader's
// tests take the list from this table. A class shared by several kinds (Activation) handles only the
// kinds it names and aborts on any other, so give a new kind its own class or its own branch.
// Tests check that every row has a factory and every factory a row (layer_factories_test.cpp), and
// meta_coverage_test.cpp runs every row on cpu and meta (update its expected count). Add an exact-bytes
// test of what the kind saves for backward (tests/workload_test.cpp, as Workload.SiluSaves...).
// Document the kind in scenarios/FORMAT.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/scenario.h"

namespace oomguard {

// How a kind changes the features of the last axis, as the variant rules check them.
enum class FeatureRule {
  kKeep,       // passes features through (activations, dropout, scale)
  kDim,        // takes and gives `dim` features (layer_norm, attention, the blocks)
  kLinear,     // takes `in`, gives `out`
  kEmbedding,  // takes token ids (data.dtype int64, first layer only), gives `dim`
};

struct LayerKindInfo {
  std::string name;
  std::vector<std::string> fields;    // the LayerSpec fields it takes, in the order messages list them
  std::vector<std::string> required;  // of those, the ones without a usable default
  bool has_parameters = false;        // an in-place pitfall can target its first parameter
  bool attention_like = false;        // runs self-attention; its `attention` field picks the implementation
  bool transformer_block = false;     // one of the memory estimate's layers (its dim is the hidden size)
  FeatureRule features = FeatureRule::kKeep;

  bool Takes(std::string_view field) const;
};

// Every kind, in the order messages list them.
const std::vector<LayerKindInfo>& LayerKinds();
std::vector<std::string> LayerKindNames();

// The row named `name`, or nullptr.
const LayerKindInfo* FindLayerKind(std::string_view name);

// The row of a loaded spec's kind; an unknown kind is a programmer error (the loader rejects them).
const LayerKindInfo& LayerKindOf(const LayerSpec& spec);

}  // namespace oomguard
