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

// Parameters: embedding 10*8; per block 2 layer norms (2*8 each), qkv 24*8, out 8*8, up 16*8, down 8*16;
// head 10*8 + 10.
constexpr int64_t kParameters = 80 + 2 * (32 + 192 + 64 + 128 + 128) + 90;

Scenario LoadTinyDecoder(const std::string& text = kTinyDecoder) {
  Scenario s;
  std::string error;
  EXPECT_TRUE(LoadScenarioText(text, "tiny.json", &s, &error)) << error;
  return s;
}

struct Estimated {
  VariantMeasurement m;
  std::optional<MemoryEstimate> e;
};

// The scenario's variant measured on meta, and the estimate beside it.
Estimated MeasureAndEstimate(const Scenario& s) {
  Estimated r{MeasureVariant(s.variants[0], VariantMeasureOptions{.backend = Backend::kMeta}), std::nullopt};
  EXPECT_EQ(Name(r.m.outcome), "pass") << r.m.error;
  r.e = EstimateMemory(s, s.variants[0], r.m);
  return r;
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
  const auto [m, e] = MeasureAndEstimate(LoadTinyDecoder());
  ASSERT_TRUE(e.has_value());
  const int64_t n = kParameters;
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

// Note [Master weights], workload/loop/master_weights.h: bfloat16 parameters and gradients, a float32 master
// and AdamW's two float32 moments, 2 + 2 + 12 bytes per parameter, each row measured as the rule states.
TEST(MemoryEstimate, MasterWeightsAreMixedPrecisionsRule) {
  std::string text = kTinyDecoder;
  text.replace(text.find("\"layers\""), 8, "\"dtype\": \"bfloat16\", \"layers\"");
  text.replace(text.find("\"kind\": \"adamw\""), 15, "\"kind\": \"adamw\", \"master_weights\": true");
  const auto [m, e] = MeasureAndEstimate(LoadTinyDecoder(text));
  ASSERT_TRUE(e.has_value());
  const int64_t n = kParameters;
  EXPECT_EQ(e->parameter_count, n);
  EXPECT_EQ(e->activation_formula, "3 x 4 x 8 x 2 blocks x 2 bytes x 17");
  ASSERT_EQ(e->rows.size(), 6u);
  EXPECT_EQ(e->rows[0].estimated, 2 * n);
  EXPECT_EQ(e->rows[0].measured, 2 * n);
  EXPECT_EQ(e->rows[1].estimated, 2 * n);
  EXPECT_EQ(e->rows[1].measured, 2 * n);
  EXPECT_EQ(e->rows[2].estimated, 12 * n);  // the master 4, exp_avg 4, exp_avg_sq 4
  EXPECT_EQ(e->rows[2].measured, 12 * n);
  EXPECT_EQ(e->rows[3].estimated, 3 * 4 * 8 * 2 * 2 * 17);
  EXPECT_EQ(e->rows[5].estimated, 16 * n + 3 * 4 * 8 * 2 * 2 * 17);
}

// SGD keeps the master too: 4 alone, 4 + 4 with momentum; without master weights the float32 rule
// stays, whatever the model's dtype.
TEST(MemoryEstimate, MasterWeightsWithSgdAddTheMasterToItsState) {
  const Scenario s = LoadTinyDecoder();
  VariantSpec spec = s.variants[0];
  spec.model.dtype = DType::kBFloat16;
  spec.loop.optimizer = OptimizerSpec{.kind = "sgd", .momentum = 0.9, .master_weights = true};
  VariantMeasurement m;
  m.param_bytes = 2 * 1000;
  std::optional<MemoryEstimate> e = EstimateMemory(s, spec, m);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rows[0].estimated, 2 * 1000);
  EXPECT_EQ(e->rows[1].estimated, 2 * 1000);
  EXPECT_EQ(e->rows[2].estimated, 8 * 1000);
  spec.loop.optimizer.momentum = 0;
  e = EstimateMemory(s, spec, m);
  EXPECT_EQ(e->rows[2].estimated, 4 * 1000);
  spec.loop.optimizer.master_weights = false;
  e = EstimateMemory(s, spec, m);
  EXPECT_EQ(e->rows[0].estimated, 4 * 1000);
  EXPECT_EQ(e->rows[1].estimated, 4 * 1000);
  EXPECT_EQ(e->rows[2].estimated, 0);
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
