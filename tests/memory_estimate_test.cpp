// The scenario keys of the big-model scenarios (layer `repeat`, `estimate`) and the estimate rows.
#include "verdict/memory_estimate.h"

#include <gtest/gtest.h>

#include "scenario/scenario_loader.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

// Two transformer blocks written once with repeat; dim 8, 2 heads, MLP 16, seq 4, batch 3, vocab 10.
constexpr const char* kTinyDecoder = R"json({
  "name": "tiny-decoder", "summary": "s", "backends": ["cpu", "meta"],
  "estimate": {"activation_factor": 17},
  "model": {"layers": [
    {"kind": "embedding", "vocab": 10, "dim": 8},
    {"kind": "transformer_block", "dim": 8, "heads": 2, "hidden": 16, "causal": true, "repeat": 2},
    {"kind": "linear", "in": 8, "out": 10}]},
  "data": {"batch": 3, "shape": [4], "dtype": "int64", "vocab": 10, "classes": 10},
  "loop": {"iterations": 1, "loss": "cross_entropy", "optimizer": {"kind": "adamw"}},
  "variants": {"step": {}}
})json";

Scenario LoadTinyDecoder() {
  Scenario s;
  std::string error;
  EXPECT_TRUE(LoadScenarioText(kTinyDecoder, "tiny.json", &s, &error)) << error;
  return s;
}

TEST(ScenarioKeys, RepeatExpandsALayerIntoCopiesInARow) {
  const Scenario s = LoadTinyDecoder();
  ASSERT_EQ(s.variants.size(), 1u);
  const std::vector<LayerSpec>& layers = s.variants[0].model.layers;
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[1].kind, "transformer_block");
  EXPECT_EQ(layers[2].kind, "transformer_block");
  EXPECT_EQ(layers[2].hidden, 16);
  EXPECT_EQ(layers[3].kind, "linear");
  ASSERT_TRUE(s.estimate.has_value());
  EXPECT_EQ(s.estimate->activation_factor, 17);
}

TEST(ScenarioKeys, BadRepeatAndEstimateNameThePath) {
  Scenario s;
  std::string error;
  std::string text = kTinyDecoder;
  text.replace(text.find("\"repeat\": 2"), 11, "\"repeat\": 0");
  EXPECT_FALSE(LoadScenarioText(text, "tiny.json", &s, &error));
  EXPECT_NE(error.find("model.layers[1].repeat"), std::string::npos) << error;
  text = kTinyDecoder;
  text.replace(text.find("\"activation_factor\": 17"), 23, "\"activation_factr\": 17");
  EXPECT_FALSE(LoadScenarioText(text, "tiny.json", &s, &error));
  EXPECT_NE(error.find("did you mean \"activation_factor\""), std::string::npos) << error;
}

TEST(MemoryEstimate, RowsCompareTheRuleWithTheMeasurementExactly) {
  const Scenario s = LoadTinyDecoder();
  const VariantMeasurement m = MeasureVariant(s.variants[0], VariantMeasureOptions{.backend = Backend::kMeta});
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  const std::optional<MemoryEstimate> e = EstimateMemory(s, s.variants[0], m);
  ASSERT_TRUE(e.has_value());
  // Parameters: embedding 10*8; per block 2 layer norms (2*8 each), qkv 24*8, out 8*8, up 16*8, down 8*16;
  // head 10*8 + 10.
  const int64_t n = 80 + 2 * (32 + 192 + 64 + 128 + 128) + 90;
  EXPECT_EQ(e->parameter_count, n);
  EXPECT_EQ(m.param_bytes, 4 * n);
  EXPECT_EQ(e->activation_formula, "3 x 4 x 8 x 2 blocks x 4 bytes x 17");
  ASSERT_EQ(e->rows.size(), 6u);
  EXPECT_EQ(e->rows[0].component, "parameters");
  EXPECT_EQ(e->rows[0].estimated, 4 * n);
  EXPECT_EQ(e->rows[0].measured, 4 * n);
  EXPECT_EQ(e->rows[1].estimated, 4 * n);
  EXPECT_EQ(e->rows[1].measured, m.grad_bytes);
  EXPECT_EQ(e->rows[2].estimated, 8 * n);  // AdamW: exp_avg and exp_avg_sq
  EXPECT_EQ(e->rows[2].measured, 8 * n);
  EXPECT_EQ(e->rows[3].component, "activations");
  EXPECT_EQ(e->rows[3].estimated, 3 * 4 * 8 * 2 * 4 * 17);
  EXPECT_EQ(e->rows[3].measured, m.forward_saved_bytes);
  EXPECT_EQ(*e->rows[4].measured, m.ledger.peak_bytes - 4 * n - *m.grad_bytes - 8 * n - *m.forward_saved_bytes);
  EXPECT_EQ(e->rows[5].component, "peak");
  EXPECT_EQ(e->rows[5].estimated, 16 * n + 3 * 4 * 8 * 2 * 4 * 17);
}

TEST(MemoryEstimate, NoneWithoutAnEstimateOrWithoutTransformerBlocks) {
  Scenario s = LoadTinyDecoder();
  const VariantMeasurement m;
  VariantSpec mlp = s.variants[0];
  mlp.model.layers.erase(mlp.model.layers.begin() + 1, mlp.model.layers.begin() + 3);
  EXPECT_FALSE(EstimateMemory(s, mlp, m).has_value());
  s.estimate.reset();
  EXPECT_FALSE(EstimateMemory(s, s.variants[0], m).has_value());
}

}  // namespace
}  // namespace oomguard
