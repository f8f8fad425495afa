// nn/ builds every kind of the layer-kind table (model/layer_kinds.h), and only those: each row has
// exactly one factory, each factory a row, and what it builds has parameters iff the row says so.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>

#include "model/layer_kinds.h"
#include "nn/layers/layers.h"

namespace oomguard {
namespace {

TEST(LayerFactories, EveryTableRowHasOneFactoryAndEveryFactoryARow) {
  std::map<std::string, int> factories;
  for (const LayerFactoryEntry& entry : LayerFactories()) {
    ++factories[std::string(entry.kind)];
    EXPECT_NE(FindLayerKind(entry.kind), nullptr) << "factory for " << entry.kind << ", which has no table row";
  }
  for (const LayerKindInfo& kind : LayerKinds()) {
    EXPECT_EQ(factories[kind.name], 1) << "factories for layer kind " << kind.name;
  }
  EXPECT_EQ(factories.size(), LayerKinds().size());
}

TEST(LayerFactories, BuiltLayersHaveParametersAsTheTableSays) {
  for (const LayerKindInfo& kind : LayerKinds()) {
    LayerSpec spec;
    spec.kind = kind.name;
    spec.in = spec.out = spec.dim = 8;
    spec.hidden = 16;
    spec.heads = 2;
    spec.vocab = 10;
    const auto layer = MakeLayer(spec, at::TensorOptions().device(at::kMeta), "0:" + kind.name);
    ASSERT_NE(layer, nullptr) << kind.name;
    EXPECT_EQ(layer->name(), "0:" + kind.name);
    EXPECT_EQ(!layer->parameters().empty(), kind.has_parameters) << kind.name;
  }
}

}  // namespace
}  // namespace oomguard
