// Real ranks on cpu (Note [Real ranks on cpu], workload/parallel/rank_group.h): N children joined by gloo, each
// measured on its own ledger, equal to the byte to the rank meta simulates alone on a FakeProcessGroup;
// a failing rank ends the variant with its name (Note [A failing rank ends the variant]).
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run/runner.h"
#include "tests/rank_expectations.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

using nlohmann::json;
using testing::ExpectRankEqualsMeta;

const ScenarioResult& OnlyScenario(const RunResults& report) {
  EXPECT_EQ(report.scenarios.size(), 1u);
  EXPECT_EQ(report.scenarios.at(0).error, "");
  return report.scenarios.at(0);
}

const VariantResult& VariantNamed(const ScenarioResult& s, const std::string& name) {
  for (const VariantResult& v : s.variants) {
    if (v.name == name) return v;
  }
  ADD_FAILURE() << "no variant " << name;
  return s.variants.at(0);
}

RunResults RunOn(const std::string& file, const std::string& backend, const std::string& filter,
                 const std::vector<std::string>& inject = {}) {
  RunOptions options;
  options.paths = {file};
  options.backend = backend;
  options.filter = filter;
  options.jobs = 2;
  options.inject = inject;
  options.timeout_seconds = 120;
  RunResults report;
  std::string error;
  EXPECT_TRUE(RunScenarios(options, OOMGUARD_EXE, nullptr, &report, &error)) << error;
  return report;
}

// The catalog's ddp-gradient-bucket-copy at world `world` (the catalog runs it at 8): its model, data and
// loop, each of its variants and zero1, fsdp, fsdp with checkpointing and fsdp in mixed precision besides,
// once per rank (variant NAME_rR has parallel.rank R). Its expectations and checks are the catalog's
// numbers at world 8 and are left out.
std::string CatalogAtWorld(int64_t world) {
  std::ifstream in(std::string(OOMGUARD_SOURCE_DIR) + "/scenarios/ddp-gradient-bucket-copy.json");
  std::stringstream text;
  text << in.rdbuf();
  json catalog = json::parse(text.str(), nullptr, true, /*ignore_comments=*/true);
  json variants = catalog.at("variants");
  variants["zero1"] = {{"parallel", {{"strategy", "zero1"}}}};
  variants["fsdp"] = {{"parallel", {{"strategy", "fsdp"}}}};  // workload/parallel/fully_sharded.h
  // Note [Checkpointing an FSDP2 unit]: one checkpointed segment a layer (4 linears, 3 gelus).
  variants["fsdp_checkpointed"] = {{"parallel", {{"strategy", "fsdp"}}},
                                   {"pitfalls", {{"checkpoint", {{"segments", 7}}}}}};
  // Note [FSDP2 mixed precision]: bf16 all-gathers and gradients, a float32 reduce-scatter.
  variants["fsdp_mixed"] = {
      {"parallel", {{"strategy", "fsdp"}, {"param_dtype", "bfloat16"}, {"reduce_dtype", "float32"}}}};
  json scenario = catalog;
  scenario.erase("expect");
  scenario.erase("checks");
  scenario["name"] = "catalog-at-world-" + std::to_string(world);
  scenario["parallel"]["world"] = world;
  scenario["variants"] = json::object();
  for (const auto& [name, patch] : variants.items()) {
    for (int64_t rank = 0; rank < world; ++rank) {
      json p = patch;
      p["parallel"]["rank"] = rank;
      scenario["variants"][name + "_r" + std::to_string(rank)] = p;
    }
  }
  return scenario.dump(2);
}

TEST(RealRanks, EveryParallelCatalogVariantOnGlooEqualsMetasFakeGroupPerRankToTheByte) {
  testing::ScratchFolder folder("real-ranks");
  constexpr int64_t kParameters = 4 * (1024 * 1024 + 1024);  // the catalog's 4 linear layers, 4,198,400
  for (const int64_t world : {2, 4}) {
    const std::string file = folder.Write("world" + std::to_string(world) + ".json", CatalogAtWorld(world));
    const RunResults cpu = RunOn(file, "cpu", "*/*_r0");  // each runs all `world` ranks
    const RunResults meta = RunOn(file, "meta", "*");     // one simulated rank per variant
    for (const std::string name : {"pitfall", "fixed", "zero1", "zero2", "fsdp", "fsdp_checkpointed", "fsdp_mixed"}) {
      const VariantResult& real = VariantNamed(OnlyScenario(cpu), name + "_r0");
      ASSERT_TRUE(real.measurement.has_value()) << real.diagnostics;
      const std::vector<RankMeasurement>& ranks = real.measurement->ranks;
      ASSERT_EQ(ranks.size(), static_cast<size_t>(world)) << name;
      for (int64_t rank = 0; rank < world; ++rank) {
        const VariantResult& simulated = VariantNamed(OnlyScenario(meta), name + "_r" + std::to_string(rank));
        ASSERT_TRUE(simulated.measurement.has_value()) << simulated.diagnostics;
        EXPECT_EQ(ranks[rank].rank, rank);
        ExpectRankEqualsMeta(ranks[rank], *simulated.measurement,
                             name + " rank " + std::to_string(rank) + " of " + std::to_string(world));
      }
      // Independent of either backend: the ZeRO division of float32 Adam (4 + 8 bytes per parameter
      // of the rank's slice; the flat buffer padded to a multiple of 2 x world elements, which 4,198,400
      // is at world 2 and 4, so every slice has kParameters / world elements).
      if (name == "zero2" || name == "fsdp_mixed") {
        EXPECT_EQ(*ranks[world - 1].grad_bytes, kParameters / world * 4) << name;
        EXPECT_EQ(*ranks[world - 1].optimizer_state_bytes, kParameters / world * 8) << name;
      }
      if (name == "fsdp_mixed") EXPECT_EQ(ranks[world - 1].param_bytes, kParameters / world * 4);
      // Gloo's own copies are no transfers of the step, and no diagnosis (its reduce-scatter's copy out of
      // its staging once read as a host-to-device copy in backward: transfer-in-recompute).
      const VariantResult& meta_rank0 = VariantNamed(OnlyScenario(meta), name + "_r0");
      EXPECT_EQ(real.measurement->transfers, meta_rank0.measurement->transfers) << name;
      EXPECT_EQ(real.measurement->diagnoses.size(), meta_rank0.measurement->diagnoses.size()) << name;
      // The headline is rank 0's (Note [Whose measurement is the variant's]).
      EXPECT_EQ(real.measurement->ledger.peak_bytes, ranks[0].peak_bytes);
    }
  }
}

// Mixed-precision Adam (Note [Master weights], workload/loop/master_weights.h) at world 2: each real rank
// equals meta's simulated rank to the byte, and both hold the ZeRO paper's figures for N = 16576 bf16
// parameters (no padding at world 2): ddp 2 + 2 + 12 bytes a parameter, zero1 and zero2 2 + 6 and
// DeepSpeed's gradients between backward and the step, the whole ones of the parameters a rank's
// partition crosses (Note [Gradients between backward and step], workload/parallel/data_parallel.h):
// S = 8288 ends inside bias 1 ([8192, 8320)), so rank 0 holds weight 1 and bias 1, 8320 elements, and
// rank 1 bias 1, weight 2 and bias 2, 128 + 8192 + 64 = 8384; fsdp 1 + 1 + 6. The loss is mse: its bf16 mean reduces through float32 on cpu, and meta
// mirrors it (Note [mse_loss's reduction on cpu], backends/meta/kernels/meta_kernels_loss.cpp).
TEST(RealRanks, MasterWeightsOnGlooEqualMetasFakeGroupPerRankAndTheZeroPapersFigures) {
  testing::ScratchFolder folder("real-ranks-master");
  json scenario =
      json::parse(R"({"name": "mixed", "summary": "mixed-precision Adam at world 2", "backends": ["cpu", "meta"],
    "model": {"dtype": "bfloat16", "layers": [{"kind": "linear", "in": 64, "out": 128}, {"kind": "relu"},
                                              {"kind": "linear", "in": 128, "out": 64}]},
    "data": {"batch": 8, "shape": [64], "dtype": "bfloat16"},
    "loop": {"iterations": 2, "loss": "mse", "optimizer": {"kind": "adam", "master_weights": true}},
    "parallel": {"world": 2}, "variants": {}})");
  constexpr int64_t kN = 64 * 128 + 128 + 128 * 64 + 64;
  struct Figures {
    std::string strategy;
    int64_t params;
    std::array<int64_t, 2> grads;  // rank 0's, rank 1's
    int64_t state;
  };
  const std::vector<Figures> figures = {{"ddp", 2 * kN, {2 * kN, 2 * kN}, 12 * kN},
                                        {"zero1", 2 * kN, {2 * 8320, 2 * 8384}, 6 * kN},
                                        {"zero2", 2 * kN, {2 * 8320, 2 * 8384}, 6 * kN},
                                        {"fsdp", kN, {kN, kN}, 6 * kN}};
  for (const Figures& f : figures) {
    for (const int rank : {0, 1}) {
      scenario["variants"][f.strategy + "_r" + std::to_string(rank)] = {
          {"parallel", {{"strategy", f.strategy}, {"rank", rank}}}};
    }
  }
  const std::string file = folder.Write("mixed.json", scenario.dump(2));
  const RunResults cpu = RunOn(file, "cpu", "*/*_r0");
  const RunResults meta = RunOn(file, "meta", "*");
  for (const Figures& f : figures) {
    const VariantResult& real = VariantNamed(OnlyScenario(cpu), f.strategy + "_r0");
    ASSERT_TRUE(real.measurement.has_value()) << real.diagnostics;
    ASSERT_EQ(real.measurement->ranks.size(), 2u) << f.strategy;
    for (int64_t rank = 0; rank < 2; ++rank) {
      const RankMeasurement& r = real.measurement->ranks[rank];
      const VariantResult& simulated = VariantNamed(OnlyScenario(meta), f.strategy + "_r" + std::to_string(rank));
      ASSERT_TRUE(simulated.measurement.has_value()) << simulated.diagnostics;
      ExpectRankEqualsMeta(r, *simulated.measurement, f.strategy + " rank " + std::to_string(rank));
      EXPECT_EQ(r.param_bytes, f.params) << f.strategy;
      EXPECT_EQ(r.grad_bytes, f.grads[rank]) << f.strategy << " rank " << rank;
      EXPECT_EQ(r.optimizer_state_bytes, f.state) << f.strategy;
    }
  }
}

// Autocast under FSDP2's MixedPrecisionPolicy (Note [Autocast under FSDP2's policy],
// workload/parallel/fully_sharded.h) at world 2: each real rank equals meta's simulated rank to the byte,
// with autocast and without. The gathered parameters and the cast input are bf16 already, so autocast
// casts nothing for the linears; mse_loss, on AutocastCPU's fp32 list, gets the bf16 output [8, 64] and
// its bf16 zeros cast to float32, and saves those. The loss keeps its unreduced input-sized storage
// (Note [mse_loss's reduction on cpu], backends/meta/kernels/meta_kernels.cpp). So the forward keeps, an
// element, 4 + 4 + 4 bytes (the output's and the zeros' casts, the loss) where it kept 2 + 2 (the bf16
// zeros, the loss; the bf16 output is the loop's either way): 8 x 8 x 64 = 4096 bytes more. The reports
// name the precision (ParallelMeasurement).
TEST(RealRanks, AutocastUnderFsdpsMixedPrecisionOnGlooEqualsMetasFakeGroupPerRank) {
  testing::ScratchFolder folder("real-ranks-autocast");
  json scenario = json::parse(R"({"name": "mixed", "summary": "autocast under fsdp's policy at world 2",
    "backends": ["cpu", "meta"],
    "model": {"layers": [{"kind": "linear", "in": 64, "out": 128}, {"kind": "relu"},
                         {"kind": "linear", "in": 128, "out": 64}]},
    "data": {"batch": 8, "shape": [64]},
    "loop": {"iterations": 2, "loss": "mse", "optimizer": {"kind": "adam"}},
    "parallel": {"world": 2, "strategy": "fsdp", "param_dtype": "bfloat16", "reduce_dtype": "float32"},
    "variants": {}})");
  for (const int rank : {0, 1}) {
    scenario["variants"]["plain_r" + std::to_string(rank)] = {{"parallel", {{"rank", rank}}}};
    scenario["variants"]["autocast_r" + std::to_string(rank)] = {{"parallel", {{"rank", rank}}},
                                                                 {"loop", {{"autocast", "bfloat16"}}}};
  }
  const std::string file = folder.Write("mixed.json", scenario.dump(2));
  const RunResults cpu = RunOn(file, "cpu", "*/*_r0");
  const RunResults meta = RunOn(file, "meta", "*");
  for (const std::string name : {"plain", "autocast"}) {
    const VariantResult& real = VariantNamed(OnlyScenario(cpu), name + "_r0");
    ASSERT_TRUE(real.measurement.has_value()) << real.diagnostics;
    ASSERT_EQ(real.measurement->ranks.size(), 2u) << name;
    for (int64_t rank = 0; rank < 2; ++rank) {
      const VariantResult& simulated = VariantNamed(OnlyScenario(meta), name + "_r" + std::to_string(rank));
      ASSERT_TRUE(simulated.measurement.has_value()) << simulated.diagnostics;
      ExpectRankEqualsMeta(real.measurement->ranks[rank], *simulated.measurement,
                           name + " rank " + std::to_string(rank));
    }
    ASSERT_TRUE(real.measurement->parallel.has_value());
    EXPECT_EQ(real.measurement->parallel->param_dtype, "bfloat16");
    EXPECT_EQ(real.measurement->parallel->reduce_dtype, "float32");
  }
  for (const RunResults* run : {&cpu, &meta}) {
    const VariantMeasurement& plain = *VariantNamed(OnlyScenario(*run), "plain_r0").measurement;
    const VariantMeasurement& autocast = *VariantNamed(OnlyScenario(*run), "autocast_r0").measurement;
    EXPECT_EQ(*autocast.forward_saved_bytes - *plain.forward_saved_bytes, 8 * 8 * 64) << plain.backend;
    EXPECT_EQ(autocast.param_bytes, plain.param_bytes);  // the float32 shards, as without
    EXPECT_EQ(autocast.optimizer_state_bytes, plain.optimizer_state_bytes);
  }
}

// The same with padding (Note [Master weights], workload/loop/master_weights.h): linear 64 -> 3 more
// makes N = 16771, padded to 16772 at world 2 (a multiple of 2 x 2), S = 8386, rank 1's partition one
// element of padding. DeepSpeed's master is the whole partition on both ranks, 12 x 8386 bytes; both
// stages hold the whole gradients of the parameters a partition crosses, and the last rank
// get_flat_partition's zeros for its padding: rank 0's [0, 8386) ends inside weight 2 ([8320, 16512)):
// 8192 + 128 + 8192 = 16512 elements; rank 1's starts there: 8192 + 64 + 192 + 3 = 8451, and 1 zero.
// Real gloo ranks and meta's simulated one agree to the byte, the step (flattened copy, cast, 16-bit
// gradients freed) included.
TEST(RealRanks, MasterWeightsFlatPartitionWithPaddingOnGlooEqualsMeta) {
  testing::ScratchFolder folder("real-ranks-master-padded");
  json scenario = json::parse(
      R"({"name": "padded", "summary": "mixed-precision Adam, padded, at world 2", "backends": ["cpu", "meta"],
    "model": {"dtype": "bfloat16", "layers": [{"kind": "linear", "in": 64, "out": 128}, {"kind": "relu"},
                                              {"kind": "linear", "in": 128, "out": 64},
                                              {"kind": "linear", "in": 64, "out": 3}]},
    "data": {"batch": 8, "shape": [64], "dtype": "bfloat16"},
    "loop": {"iterations": 2, "loss": "mse", "optimizer": {"kind": "adam", "master_weights": true}},
    "parallel": {"world": 2}, "variants": {}})");
  constexpr int64_t kN = 64 * 128 + 128 + 128 * 64 + 64 + 64 * 3 + 3, kS = 8386;
  static_assert(2 * kS == kN + 1);
  for (const std::string strategy : {"zero1", "zero2"}) {
    for (const int rank : {0, 1}) {
      scenario["variants"][strategy + "_r" + std::to_string(rank)] = {
          {"parallel", {{"strategy", strategy}, {"rank", rank}}}};
    }
  }
  const std::string file = folder.Write("padded.json", scenario.dump(2));
  const RunResults cpu = RunOn(file, "cpu", "*/*_r0");
  const RunResults meta = RunOn(file, "meta", "*");
  for (const std::string strategy : {"zero1", "zero2"}) {
    const VariantResult& real = VariantNamed(OnlyScenario(cpu), strategy + "_r0");
    ASSERT_TRUE(real.measurement.has_value()) << real.diagnostics;
    ASSERT_EQ(real.measurement->ranks.size(), 2u) << strategy;
    for (int64_t rank = 0; rank < 2; ++rank) {
      const RankMeasurement& r = real.measurement->ranks[rank];
      const VariantResult& simulated = VariantNamed(OnlyScenario(meta), strategy + "_r" + std::to_string(rank));
      ASSERT_TRUE(simulated.measurement.has_value()) << simulated.diagnostics;
      ExpectRankEqualsMeta(r, *simulated.measurement, strategy + " rank " + std::to_string(rank));
      EXPECT_EQ(r.optimizer_state_bytes, 12 * kS) << strategy;
      const int64_t grads = rank == 0 ? 2 * 16512 : 2 * 8451 + 2 * 1;
      EXPECT_EQ(r.grad_bytes, grads) << strategy << " rank " << rank;
    }
  }
}

TEST(RealRanks, AnInjectedOomInRankOneEndsRankZeroAndNamesRankOne) {
  testing::ScratchFolder folder("real-ranks-inject");
  const std::string file = folder.Write("two.json", R"({"name": "two", "summary": "two real ranks",
    "model": {"layers": [{"kind": "linear", "in": 64, "out": 64}, {"kind": "relu"}, {"kind": "linear", "in": 64, "out": 8}]},
    "data": {"batch": 4, "shape": [64]}, "loop": {"iterations": 2, "loss": "mse", "optimizer": {"kind": "adam"}},
    "parallel": {"world": 2, "strategy": "ddp"}, "variants": {"a": {}}})");
  const RunResults report = RunOn(file, "cpu", "*", {"rank=1,nth=3"});
  const VariantResult& v = VariantNamed(OnlyScenario(report), "a");
  ASSERT_TRUE(v.measurement.has_value()) << v.diagnostics;
  const VariantMeasurement& m = *v.measurement;
  EXPECT_EQ(Name(m.outcome), "oom");
  EXPECT_EQ(m.error.rfind("rank 1 of 2: ", 0), 0u) << m.error;
  // Rank 0 waits for rank 1 to join gloo, which it never does: the runner ends it after its grace.
  EXPECT_NE(m.error.find("(the runner ended rank 0)"), std::string::npos) << m.error;
  ASSERT_EQ(m.injected.size(), 1u);
  EXPECT_EQ(m.injected[0].allocation_index, 3);
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_TRUE(m.ranks[0].ended);
  EXPECT_EQ(m.ranks[0].error, "ended by the runner after rank 1 of 2 failed");
  EXPECT_FALSE(m.ranks[1].ended);
  EXPECT_EQ(Name(m.ranks[1].outcome), "oom");
  // Failing after the group is made, in forward or the optimizer: rank 1 still, not rank 0, which saw it
  // go (Note [A rank's groups live until it exits], workload/parallel/rank_group.cpp).
  for (const std::string nth : {"15", "30"}) {
    const RunResults later = RunOn(file, "cpu", "*", {"rank=1,nth=" + nth});
    const VariantResult& lv = VariantNamed(OnlyScenario(later), "a");
    ASSERT_TRUE(lv.measurement.has_value()) << nth << ": " << lv.diagnostics;
    const VariantMeasurement& l = *lv.measurement;
    EXPECT_EQ(Name(l.outcome), "oom") << nth;
    EXPECT_EQ(l.error.rfind("rank 1 of 2: ", 0), 0u) << nth << ": " << l.error;
    // Rank 0, in a collective with rank 1 when it went, stops on its own or is ended: never an input error.
    ASSERT_EQ(l.ranks.size(), 2u) << nth;
    EXPECT_TRUE(l.ranks[0].ended || l.ranks[0].error.rfind("a collective failed, a sibling rank gone: ", 0) == 0)
        << nth << ": " << l.ranks[0].error;
  }
  // Without rank=, every rank gets the spec: each fails its own 3rd request, and one of them is named.
  const RunResults both = RunOn(file, "cpu", "*", {"nth=3"});
  const VariantMeasurement& b = *VariantNamed(OnlyScenario(both), "a").measurement;
  EXPECT_EQ(Name(b.outcome), "oom");
  EXPECT_TRUE(b.error.rfind("rank 0 of 2: ", 0) == 0 || b.error.rfind("rank 1 of 2: ", 0) == 0) << b.error;
}

}  // namespace
}  // namespace oomguard
