// `oomguard fit --knob world` on a small ZeRO-2 MLP at meta: the smallest world per cap, exact, from
// the bytes a rank holds; ddp's one trial; and the usage errors.
//
// The MLP has P = 2 x 256 x 256 = 131072 float32 parameters. Under zero2 at world W (Note [One
// simulated rank], workload/parallel/data_parallel.h) they are flattened into a buffer padded to a multiple of
// 2 W elements, padded(W) = ceil(P / 2W) 2W, and rank r owns S(W) = padded(W) / W of them; rank 0 a full
// slice, the last rank the padding. Its peak (in backward, on the tensors' bytes: --verdict allocated)
// is a part C that no world changes (the staging of the bucket's gradients, a gradient, the
// activations, the parameters' P x 4 bytes), plus the padding's 4 bytes per element, plus Adam's 8
// bytes per owned element:
//     peak(W, rank 0) = C + 4 (padded(W) - P) + 8 S(W)
// The test takes C from one measurement at world 2 (no padding there), checks the formula at world 3
// on both ranks, and derives every answer from it. World 1 is the single-process step, whose
// parameters, gradients and Adam state alone, 16 P = 2 MiB, exceed every cap here.
#include "fit/fit_world.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/byte_size.h"
#include "base/exit_codes.h"
#include "cli_result.h"
#include "scenario/scenario_loader.h"
#include "scratch_folder.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

// `oomguard fit ARGS...`
testing::CliResult FitCli(std::vector<std::string> args) {
  args.insert(args.begin(), "fit");
  return testing::Cli(std::move(args));
}

nlohmann::json ReadJson(const std::string& path) { return nlohmann::json::parse(testing::Contents(path)); }

constexpr const char* kZeroMlp = R"({
  "name": "zero-mlp",
  "summary": "a ZeRO-2 MLP for fit --knob world",
  "backends": ["cpu", "meta"],
  "model": {"layers": [{"kind": "linear", "in": 256, "out": 256, "bias": false}, {"kind": "relu"},
                       {"kind": "linear", "in": 256, "out": 256, "bias": false}]},
  "data": {"batch": 4, "shape": [256]},
  "loop": {"iterations": 2, "loss": "mse", "optimizer": {"kind": "adam"}},
  "parallel": {"world": 2, "strategy": "zero2"},
  "variants": {"zero2": {}, "replicated": {"parallel": {"strategy": "ddp"}},
               "single": {"parallel": {"world": 1, "strategy": "ddp"}}}
})";

constexpr int64_t kParams = 2 * 256 * 256;

int64_t Padded(int64_t world) { return (kParams + 2 * world - 1) / (2 * world) * (2 * world); }
int64_t Slice(int64_t world) { return Padded(world) / world; }

VariantSpec Variant(const std::string& name) {
  Scenario s;
  std::string error;
  EXPECT_TRUE(LoadScenarioText(kZeroMlp, "zero-mlp.json", &s, &error)) << error;
  for (const VariantSpec& v : s.variants) {
    if (v.name == name) return v;
  }
  ADD_FAILURE() << "no variant " << name;
  return {};
}

int64_t MeasuredPeak(int64_t world, int64_t rank) {
  const VariantMeasurement m = MeasureVariant(
      WithWorld(Variant("zero2"), world, rank),
      VariantMeasureOptions{.backend = Backend::kMeta, .limits = Limits{}, .iterations = 0, .timeline_points = 0});
  EXPECT_EQ(Name(m.outcome), "pass") << m.error;
  return m.ledger.peak_bytes;
}

class FitWorldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = folder_.Write("zero-mlp.json", kZeroMlp);
    world_independent_ = MeasuredPeak(2, 0) - 8 * Slice(2);  // Padded(2) == kParams: no padding
  }
  int64_t Peak(int64_t world) const { return world_independent_ + 4 * (Padded(world) - kParams) + 8 * Slice(world); }
  testing::ScratchFolder folder_{"fit-world"};
  std::string file_;
  int64_t world_independent_ = 0;  // C
};

TEST_F(FitWorldTest, TheRanksPeakIsItsSliceOfAdamStateAndThePadding) {
  ASSERT_EQ(Padded(3), 131076);  // ceil(131072 / 6) x 6: 4 elements of padding, 16 bytes
  ASSERT_EQ(Slice(3), 43692);
  EXPECT_EQ(MeasuredPeak(3, 0), Peak(3));
  // The last rank owns 131072 - 2 x 43692 = 43688 parameter elements: Adam state for 4 fewer.
  EXPECT_EQ(MeasuredPeak(3, 2), Peak(3) - 8 * 4);
  EXPECT_EQ(MeasuredPeak(8, 0), Peak(8));
  EXPECT_GT(16 * kParams, Peak(2));  // world 1 holds more than any cap below peak(2)
}

// Caps, largest first: Peak(2) - 1, one byte short of world 2, and Peak(5), whose slice S(5) = 26216
// (padded to 131080) puts it between Peak(4) and Peak(6).
// Every world size (--gpus-per-node 1): at Peak(2) - 1 the search tries 1 and 2 (do not fit), 4 (fits),
// then 3 (fits: Peak(3) = C + 16 + 349536 < C + 524287): 3, in 4 trials. At Peak(5) the first cap's
// trials leave 4 as the largest world refused (Peak(4) = C + 262144 is over it); doubling gives 8
// (fits), then 6 (Peak(6) = C + 16 + 174768: fits) and 5 (fits, exactly): 5, in 3 trials.
// The default sizes 1, 2, 4, 8, 16, ...: 4 and 8, the smallest of them at or above 3 and 5.
TEST_F(FitWorldTest, TheSmallestWorldPerCapFollowsFromTheBytes) {
  ASSERT_LT(Peak(6), Peak(5));
  ASSERT_LT(Peak(5), Peak(4));
  const std::string json = folder_.path() + "/every.fit.json";
  const std::string cap2 = std::to_string(Peak(2) - 1), cap5 = std::to_string(Peak(5));
  const testing::CliResult every =
      FitCli({file_, "--knob", "world", "--backend", "meta", "--verdict", "allocated", "--gpus-per-node", "1", "--cap",
              cap5, "--cap", cap2, "--max", "64", "--variant", "zero2", "--json", json});
  ASSERT_EQ(every.code, kExitOk) << every.err;
  const nlohmann::json fit = ReadJson(json)["fit"];
  EXPECT_EQ(fit["knob"], "world");
  EXPECT_EQ(fit["knob_field"], "parallel.world");
  EXPECT_EQ(fit["gpus_per_node"], 1);
  EXPECT_EQ(fit["min"], 1);
  EXPECT_EQ(fit["max"], 64);
  EXPECT_EQ(fit["left_out"], nlohmann::json::array());  // --variant named the one fitted
  const nlohmann::json& v = fit["variants"][0];
  EXPECT_EQ(v["strategy"], "zero2");
  EXPECT_EQ(v["note"], nullptr);
  const nlohmann::json& at5 = v["cards"][0];
  const nlohmann::json& at3 = v["cards"][1];
  EXPECT_EQ(at3["min_value"], 3);
  EXPECT_EQ(at3["peak_bytes_at_min"], Peak(3));
  EXPECT_EQ(at3["last_oom_value"], 2);
  EXPECT_EQ(at3["trials"], 4);
  EXPECT_EQ(at5["min_value"], 5);
  EXPECT_EQ(at5["peak_bytes_at_min"], Peak(5));
  EXPECT_EQ(at5["last_oom_value"], 4);
  EXPECT_EQ(at5["trials"], 3);
  EXPECT_FALSE(at5.contains("max_value"));  // the growing knob's fields are not written

  const std::string nodes_json = folder_.path() + "/nodes.fit.json";
  const testing::CliResult nodes =
      FitCli({file_, "--world", "--backend", "meta", "--verdict", "allocated", "--cap", cap5, "--cap", cap2, "--max",
              "64", "--variant", "zero2", "--json", nodes_json});
  ASSERT_EQ(nodes.code, kExitOk) << nodes.err;
  const nlohmann::json cards = ReadJson(nodes_json)["fit"]["variants"][0]["cards"];
  EXPECT_EQ(cards[1]["min_value"], 4);
  EXPECT_EQ(cards[1]["last_oom_value"], 2);
  EXPECT_EQ(cards[1]["peak_bytes_at_min"], Peak(4));
  EXPECT_EQ(cards[0]["min_value"], 8);
  EXPECT_EQ(cards[0]["last_oom_value"], 4);
  EXPECT_EQ(cards[0]["peak_bytes_at_min"], Peak(8));
  EXPECT_NE(nodes.out.find("zero-mlp on meta: the smallest parallel.world at which one rank fits each card (world "
                           "sizes 1, 2, 4, then multiples of 8, searched 1..64; ranks 0 and world - 1 measured)\n"),
            std::string::npos)
      << nodes.out;
  EXPECT_NE(nodes.out.find("-      " + FormatBytes(Peak(5)) + "   8 (" + FormatBytes(Peak(8)) + ")   "),
            std::string::npos)
      << nodes.out;
}

// cpu allocates what it measures (the ranks' collectives still on the fake group): the same worlds,
// peaks and trials as meta's, the bytes being exact on both.
TEST_F(FitWorldTest, CpuFindsMetasWorlds) {
  std::vector<nlohmann::json> variants;
  for (const std::string backend : {"cpu", "meta"}) {
    const std::string json = folder_.path() + "/" + backend + ".fit.json";
    const testing::CliResult r =
        FitCli({file_, "--world", "--backend", backend, "--verdict", "allocated", "--gpus-per-node", "1", "--cap",
                std::to_string(Peak(5)), "--cap", std::to_string(Peak(2) - 1), "--max", "16", "--json", json});
    ASSERT_EQ(r.code, kExitOk) << r.err;
    variants.push_back(ReadJson(json)["fit"]["variants"]);
  }
  EXPECT_EQ(variants[0], variants[1]);
  EXPECT_EQ(variants[0][0]["cards"][0]["min_value"], 5);
  EXPECT_EQ(variants[0][0]["cards"][1]["min_value"], 3);
}

// Without --variant: zero2 is searched, ddp tried once at world 1 (Note [A strategy whose peak does
// not fall]), and the variant without `parallel` left out, each said under the table. 1 MiB is less
// than C alone: nothing fits it up to --max. 16 P + 1 MiB = 3 MiB holds world 1 (its parameters,
// gradients and Adam state, 16 P = 2 MiB, and the step's temporaries).
TEST_F(FitWorldTest, DdpIsTriedOnceAndAVariantWithoutParallelIsLeftOut) {
  ASSERT_GT(world_independent_, 1 << 20);
  const std::string json = folder_.path() + "/all.fit.json";
  const testing::CliResult r =
      FitCli({file_, "--knob", "world", "--backend", "meta", "--verdict", "allocated", "--cap", "1MiB", "--cap",
              std::to_string(16 * kParams + (1 << 20)), "--max", "64", "--json", json});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const nlohmann::json fit = ReadJson(json)["fit"];
  EXPECT_EQ(fit["left_out"], nlohmann::json::array({"single"}));
  ASSERT_EQ(fit["variants"].size(), 2u);
  const nlohmann::json& ddp = fit["variants"][1];
  EXPECT_EQ(ddp["variant"], "replicated");
  EXPECT_EQ(ddp["strategy"], "ddp");
  EXPECT_EQ(ddp["note"], WorldDoesNotShrink(ParallelSpec{}));
  EXPECT_EQ(ddp["cards"][0]["min_value"], nullptr);  // 1 MiB: not even world 1
  EXPECT_EQ(ddp["cards"][0]["last_oom_value"], 1);
  EXPECT_EQ(ddp["cards"][0]["trials"], 0);  // the larger cap's trial at world 1 measured more than 1 MiB
  EXPECT_EQ(ddp["cards"][1]["trials"], 1);  // the single-process step: 16 P bytes and its temporaries
  const nlohmann::json& zero2 = fit["variants"][0];
  EXPECT_EQ(zero2["cards"][0]["min_value"], nullptr);
  EXPECT_EQ(zero2["cards"][0]["last_oom_value"], 64);
  EXPECT_NE(r.out.find("\nnone: not even parallel.world = 64 fits\n"), std::string::npos) << r.out;
  // Why, from the trial at world 64 on the largest cap that ran it (1 MiB; the 3 MiB cap fit at world 1):
  // in backward, with the parameters (4 P bytes, no padding at 64) and the last layer's gradient
  // (256 x 256 x 4) live, zero2 asks for the staging of its one bucket, every gradient: 4 P bytes.
  const std::string why = zero2["why_none"];
  EXPECT_EQ(why.rfind("at world 64 on cap 1024.00 KiB rank 0 runs out of memory in backward, with ", 0), 0u) << why;
  EXPECT_NE(why.find(" (parameters " + FormatBytes(4 * kParams) + ", gradients " + FormatBytes(4 * 256 * 256) + ", "),
            std::string::npos)
      << why;
  const std::string asked = ") and " + FormatBytes(4 * kParams) + " more asked";
  EXPECT_EQ(why.substr(why.size() - asked.size()), asked) << why;
  EXPECT_NE(r.out.find("\nzero2: " + why + "\n"), std::string::npos) << r.out;
  EXPECT_EQ(ddp["why_none"], nullptr);  // its 1 MiB card ran no trial: the 3 MiB card's peak decided it
  EXPECT_NE(r.out.find("replicated: ddp replicates parameters, gradients and optimizer state on every rank"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("left out, without `parallel` (the single-process step, which world does not change): "
                       "single\n"),
            std::string::npos)
      << r.out;
  const size_t header = r.out.find("\ncard ");
  ASSERT_NE(header, std::string::npos) << r.out;
  const std::string header_line = r.out.substr(header + 1, r.out.find('\n', header + 1) - header - 1);
  EXPECT_NE(header_line.find(" zero2 "), std::string::npos) << header_line;  // the variant named as its strategy
  EXPECT_NE(header_line.find(" replicated (ddp) "), std::string::npos) << header_line;
  EXPECT_EQ(ddp["cards"][1]["min_value"], 1);
  EXPECT_EQ(zero2["cards"][1]["min_value"], 1);
  EXPECT_EQ(zero2["cards"][1]["trials"], 1);
}

TEST_F(FitWorldTest, WorldOnVariantsWithoutParallelIsAUsageError) {
  const std::string plain = folder_.Write("plain.json", R"({
  "name": "plain",
  "summary": "no parallel",
  "backends": ["meta"],
  "model": {"layers": [{"kind": "linear", "in": 8, "out": 8}]},
  "data": {"batch": 2, "shape": [8]},
  "loop": {"iterations": 1, "loss": "mse", "optimizer": {"kind": "sgd"}},
  "variants": {"a": {}, "b": {}}
})");
  const testing::CliResult none = FitCli({plain, "--knob", "world"});
  EXPECT_EQ(none.code, kExitUsage);
  EXPECT_EQ(none.err,
            "oomguard fit: --knob world: scenario 'plain' has no variant with `parallel` (variants: a, b); fit varies "
            "parallel.world of a variant with a strategy, e.g. \"parallel\": {\"strategy\": \"zero2\"}\n");
  EXPECT_EQ(none.out, "");
  const testing::CliResult named = FitCli({file_, "--world", "--variant", "single"});
  EXPECT_EQ(named.code, kExitUsage);
  EXPECT_EQ(named.err,
            "oomguard fit: --knob world: variant 'single' has no `parallel`: it is the single-process step, which "
            "world does not change; fit varies parallel.world of a variant with a strategy, e.g. \"parallel\": "
            "{\"strategy\": \"zero2\"}\n");
  EXPECT_EQ(FitCli({file_, "--world", "--gpus-per-node", "6"}).err,
            "oomguard fit: --gpus-per-node 6: not a power of two (world sizes are the powers of two below it, then "
            "its multiples)\n");
  EXPECT_EQ(FitCli({file_, "--gpus-per-node", "8"}).err,
            "oomguard fit: --gpus-per-node applies to --knob world only\n");
  EXPECT_EQ(FitCli({file_, "--world", "--knob", "seq"}).err,
            "oomguard fit: --world is --knob world; it cannot go with --knob seq\n");
  EXPECT_EQ(FitCli({file_, "--world", "--min", "9", "--max", "15"}).err,
            "oomguard fit: --knob world: no world size in 9..15 (world sizes: the powers of two below "
            "--gpus-per-node 8, then its multiples)\n");
  EXPECT_EQ(FitCli({file_, "--world", "--min", "9", "--max", "15"}).code, kExitUsage);
}

}  // namespace
}  // namespace oomguard
