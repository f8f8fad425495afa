// The scenario format's `parallel` (scenarios/FORMAT.md): read in the base and patched by a variant,
// carried into the variant's document, and each bad value named by its path.
#include <gtest/gtest.h>

#include "scenario/scenario_loader.h"
#include "tests/scenario_text.h"

namespace oomguard {
namespace {

using testing::Load;
using testing::LoadError;
using testing::With;

TEST(ParallelScenario, TheBaseGivesItAndAVariantPatchesIt) {
  const Scenario s = Load(With(R"("loop": {"optimizer": {"kind": "adam"}},
                                  "parallel": {"world": 4, "strategy": "zero1"})",
                               R"("variants": {"one": {}, "two": {"parallel": {"strategy": "zero2", "rank": 3}},
                                               "ddp": {"parallel": {"strategy": "ddp", "bucket_cap_mb": 1,
                                                                    "gradient_as_bucket_view": true}},
                                               "alone": {"parallel": null}})"));
  ASSERT_EQ(s.variants.size(), 4u);
  EXPECT_EQ(s.variants[0].parallel, (ParallelSpec{.world = 4, .rank = 0, .strategy = "zero1"}));
  EXPECT_EQ(s.variants[1].parallel, (ParallelSpec{.world = 4, .rank = 3, .strategy = "zero2"}));
  EXPECT_EQ(s.variants[2].parallel,
            (ParallelSpec{.world = 4, .strategy = "ddp", .bucket_cap_mb = 1, .gradient_as_bucket_view = true}));
  EXPECT_FALSE(s.variants[3].parallel.active());
  // The child reads the variant's document: the same spec.
  Scenario child;
  std::string error;
  ASSERT_TRUE(LoadScenarioText(s.variants[1].document, "child.json", &child, &error)) << error;
  EXPECT_EQ(child.variants.at(0).parallel, s.variants[1].parallel);
  // fsdp's unit: each layer by default, or the layers of one kind.
  const Scenario f = Load(With(R"("parallel": {"world": 2, "strategy": "fsdp"})",
                               R"("variants": {"a": {}, "kind": {"parallel": {"unit": "linear"}}})"));
  EXPECT_EQ(f.variants[0].parallel.unit, "layer");
  EXPECT_EQ(f.variants[1].parallel.unit, "linear");
  // Note [FSDP2 mixed precision]: MixedPrecisionPolicy's dtypes, none by default.
  const Scenario m = Load(With(R"("parallel": {"world": 2, "strategy": "fsdp"})",
                               R"("variants": {"a": {}, "mp": {"parallel": {"param_dtype": "bfloat16",
                                                                            "reduce_dtype": "float32"}}})"));
  EXPECT_EQ(m.variants[0].parallel.param_dtype, std::nullopt);
  EXPECT_EQ(m.variants[1].parallel.param_dtype, DType::kBFloat16);
  EXPECT_EQ(m.variants[1].parallel.reduce_dtype, DType::kFloat32);
  ASSERT_TRUE(LoadScenarioText(m.variants[1].document, "child.json", &child, &error)) << error;
  EXPECT_EQ(child.variants.at(0).parallel, m.variants[1].parallel);
}

// Note [FSDP2 mixed precision]: fsdp's knob, on a float32 model.
TEST(ParallelScenario, MixedPrecisionIsFsdpsOnAFloat32Model) {
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 2, "strategy": "zero2", "param_dtype": "bfloat16"})")),
            "s.json: at parallel.param_dtype: FSDP2's MixedPrecisionPolicy is a knob of parallel.strategy \"fsdp\"; "
            "strategy is \"zero2\" (set strategy \"fsdp\", or leave param_dtype and reduce_dtype out) (variant a)");
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 2, "strategy": "fsdp", "reduce_dtype": "float32"},
                               "model": {"dtype": "bfloat16", "layers": [{"kind": "linear", "in": 4, "out": 4}]})")),
            "s.json: at parallel.reduce_dtype: FSDP2's MixedPrecisionPolicy casts a float32 model's shards: expected "
            "model.dtype \"float32\", got \"bfloat16\" (set model.dtype \"float32\", or leave param_dtype and "
            "reduce_dtype out) (variant a)");
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 2, "strategy": "fsdp", "param_dtype": "bf16"})")),
            "s.json: at parallel.param_dtype: unknown dtype \"bf16\" (valid values: float32, bfloat16, float16)");
}

TEST(ParallelScenario, BadValuesNameTheirPath) {
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 0})")),
            "s.json: at parallel.world: expected an integer >= 1, got 0");
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 2, "strategy": "zero9"})")),
            "s.json: at parallel.strategy: unknown strategy \"zero9\"; did you mean \"zero1\"? (valid values: ddp, zero1, zero2, fsdp)");
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 2, "strategy": "fsdp", "unit": "block"})")),
            "s.json: at parallel.unit: unit \"block\" is neither \"layer\", \"model\" nor a layer kind of "
            "model.layers (variant a)");
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 2, "strategy": "fsdp"},
                               "model": {"layers": [{"kind": "linear", "in": 4, "out": 4},
                                                    {"kind": "linear", "in": 4, "out": 2}]},
                               "pitfalls": {"checkpoint": {"segments": 1}})")),
            "s.json: at pitfalls.checkpoint.segments: with parallel.strategy fsdp a checkpointed segment that "
            "holds a unit holds nothing else (fully_shard(checkpoint_wrapper(block))): segment 0 holds layers 0-1 "
            "and layer 0 (linear) is a unit; 2 segments (one a layer) are aligned (variant a)");
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 4, "rank": 4})")),
            "s.json: at parallel.rank: rank 4 is not a rank of world 4 (ranks are 0 .. world - 1) (variant a)");
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 2})", R"("variants": {"b": {"parallel": {"rank": 2}}})")),
            "s.json: at variants.b.parallel.rank: rank 2 is not a rank of world 2 (ranks are 0 .. world - 1)");
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 2, "strategy": "zero2"}, "loop": {"accumulate": 2})")),
            "s.json: at loop.accumulate: gradient accumulation is not simulated with parallel.strategy zero2 yet "
            "(variant a)");
  EXPECT_EQ(LoadError(With(R"("parallel": {"world": 2, "init": "meta"})")),
            "s.json: at parallel.init: a model built on meta is sharded by strategy fsdp alone (variant a)");
  EXPECT_EQ(LoadError(With(R"("parallel": {"bucket_cap_mb": 0})")),
            "s.json: at parallel.bucket_cap_mb: expected a bucket size in MiB > 0, at most 1e6, got 0");
  EXPECT_EQ(LoadError(With(R"("parallel": {"worlds": 2})")),
            "s.json: at parallel: unknown key \"worlds\"; did you mean \"world\"? (valid keys: world, rank, strategy, "
            "bucket_cap_mb, gradient_as_bucket_view, unit, init, param_dtype, reduce_dtype)");
  // Note [A workload's own ranks]: world and rank, nothing of oomguard's strategies.
  EXPECT_EQ(LoadError(R"({"name": "t", "summary": "s", "workload": "w", "parallel": {"world": 2, "strategy": "ddp"},
                          "variants": {"a": {}}})"),
            "s.json: at parallel.strategy: a workload runs its own distributed code: of \"parallel\" it takes only "
            "\"world\" and \"rank\" (its collectives go through ctx.ProcessGroup()) (variant a)");
  EXPECT_EQ(LoadError(R"({"name": "t", "summary": "s", "workload": "w", "parallel": {"world": 2},
                          "variants": {"a": {"parallel": {"rank": 2}}}})"),
            "s.json: at variants.a.parallel.rank: rank 2 is not a rank of world 2 (ranks are 0 .. world - 1)");
}

}  // namespace
}  // namespace oomguard
