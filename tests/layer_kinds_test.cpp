// The layer-kind table (model/layer_kinds.h): one row per kind, consistent with itself and with the
// readers of LayerSpec's fields; the loader's and the rules' use of it is tested by the loader tests.
#include "model/layer_kinds.h"

#include <gtest/gtest.h>

#include <set>

#include "scenario/variant_json.h"

namespace oomguard {
namespace {

TEST(LayerKinds, NamesAreUniqueAndFindable) {
  std::set<std::string> seen;
  for (const LayerKindInfo& kind : LayerKinds()) {
    EXPECT_TRUE(seen.insert(kind.name).second) << kind.name << " is listed twice";
    EXPECT_EQ(FindLayerKind(kind.name), &kind);
  }
  EXPECT_EQ(FindLayerKind("rms_norm"), nullptr);
  // The names in table order (messages list them so); a new kind adds a row, not a line here.
  std::vector<std::string> names;
  for (const LayerKindInfo& kind : LayerKinds()) names.push_back(kind.name);
  EXPECT_EQ(LayerKindNames(), names);
  EXPECT_EQ(names.front(), "linear");
}

TEST(LayerKinds, FieldsAreLayerSpecFieldsAndRequiredOnesAreTaken) {
  LayerSpec scratch;
  std::set<std::string> readable;
  for (const Field& field : variant_json::LayerFields(&scratch)) readable.insert(field.key);
  for (const LayerKindInfo& kind : LayerKinds()) {
    for (const std::string& field : kind.fields) EXPECT_TRUE(readable.count(field)) << kind.name << "." << field;
    for (const std::string& field : kind.required) EXPECT_TRUE(kind.Takes(field)) << kind.name << "." << field;
  }
}

TEST(LayerKinds, FlagsAgreeWithFields) {
  for (const LayerKindInfo& kind : LayerKinds()) {
    // The attention implementation is chosen by the `attention` field, so exactly these kinds take it.
    EXPECT_EQ(kind.attention_like, kind.Takes("attention")) << kind.name;
    EXPECT_TRUE(!kind.transformer_block || kind.attention_like) << kind.name;
    switch (kind.features) {
      case FeatureRule::kLinear:
        EXPECT_TRUE(kind.Takes("in") && kind.Takes("out")) << kind.name;
        break;
      case FeatureRule::kEmbedding:
        EXPECT_TRUE(kind.Takes("vocab") && kind.Takes("dim")) << kind.name;
        break;
      case FeatureRule::kDim:
        EXPECT_TRUE(kind.Takes("dim")) << kind.name;
        break;
      case FeatureRule::kKeep:
        EXPECT_FALSE(kind.Takes("dim") || kind.Takes("out")) << kind.name;
        break;
    }
    if (kind.features != FeatureRule::kKeep) {
      EXPECT_TRUE(kind.has_parameters) << kind.name;
    }
  }
}

}  // namespace
}  // namespace oomguard
