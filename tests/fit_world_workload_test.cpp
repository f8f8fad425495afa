// `oomguard fit --world` for a registered workload (Notes [A workload's world fit] and [A workload whose
// memory does not fall], fit/fit_world.h), on meta, where its ctx.ProcessGroup() is a FakeProcessGroup
// of the world tried.
//
// The workload of this file holds float32 weights, E = 2^20 elements in all: sharded by hand over
// ctx.WorldSize(), a rank's slice is S(W) = E / W elements at a power-of-two world; replicated, all E at
// every world. Its step makes an update of the same size, all-reduced on the group, and adds it in: the
// peak is the weights and the update, 8 S(W) bytes, 8 MiB / W sharded and 8 MiB replicated.
#include <gtest/gtest.h>
#include <oomguard/workload.h>

#include <nlohmann/json.hpp>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <utility>
#include <vector>

#include "base/exit_codes.h"
#include "cli_result.h"
#include "scratch_folder.h"

OOMGUARD_WORKLOAD(fit_world_by_hand) {
  const int64_t elements = ctx.Int("elements");
  const int64_t slice = ctx.Bool("shard") ? (elements + ctx.WorldSize() - 1) / ctx.WorldSize() : elements;
  at::Tensor weights = at::zeros({slice}, ctx.options());  // this rank's slice
  for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) {
    auto phase = ctx.Phase("step");
    std::vector<at::Tensor> update{weights * 2};
    ctx.ProcessGroup()->allreduce(update)->wait();
    weights.add_(update[0]);
  }
}

namespace oomguard {
namespace {

constexpr int64_t kMiB = 1 << 20;

constexpr const char* kByHand = R"({
  "name": "by-hand",
  "summary": "weights sharded by hand over ctx.WorldSize(), or replicated",
  "backends": ["meta"],
  "workload": "fit_world_by_hand",
  "knobs": {"elements": 1048576, "shard": true},
  "loop": {"iterations": 1},
  "parallel": {"world": 2},
  "variants": {"sharded": {}, "replicated": {"knobs": {"shard": false}}, "alone": {"parallel": null},
               "last": {"parallel": {"world": 4, "rank": 3}}}
})";

testing::CliResult FitCli(std::vector<std::string> args) {
  args.insert(args.begin(), "fit");
  return testing::Cli(std::move(args));
}

// 3 MiB holds 8 MiB / 4 and not 8 MiB / 2: world 4 is the first that fits, after 1 and 2 (3 trials).
// 1.5 MiB then starts from what 3 MiB's trials proved (2 MiB at world 4 is over it): world 8 alone,
// 1 MiB. The replicated variant's three probe trials (worlds 1, 2 and 64) hold 8 MiB each: its note
// says so, and its search is one trial at world 1, which 1.5 MiB inherits.
TEST(FitWorldWorkload, TheSmallestWorldOfAWorkloadThatShardsByHandAndTheOneThatShardsNothing) {
  testing::ScratchFolder folder("fit-world-workload");
  const std::string file = folder.Write("by-hand.json", kByHand);
  const std::string json = folder.path() + "/by-hand.fit.json";
  const testing::CliResult r =
      FitCli({file, "--world", "--verdict", "allocated", "--cap", "3MiB", "--cap", "1536KiB", "--max", "64",
              "--variant", "sharded", "--variant", "replicated", "--json", json});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const nlohmann::json fit = nlohmann::json::parse(testing::Contents(json))["fit"];
  EXPECT_EQ(fit["backend"], "meta");
  ASSERT_EQ(fit["variants"].size(), 2u);
  const nlohmann::json& sharded = fit["variants"][0];
  EXPECT_EQ(sharded["variant"], "sharded");
  EXPECT_EQ(sharded["strategy"], "own");
  EXPECT_EQ(sharded["note"], nullptr);
  const nlohmann::json& at3 = sharded["cards"][0];
  EXPECT_EQ(at3["min_value"], 4);
  EXPECT_EQ(at3["peak_bytes_at_min"], 2 * kMiB);
  EXPECT_EQ(at3["last_oom_value"], 2);
  EXPECT_EQ(at3["trials"], 3);
  const nlohmann::json& at1_5 = sharded["cards"][1];
  EXPECT_EQ(at1_5["min_value"], 8);
  EXPECT_EQ(at1_5["peak_bytes_at_min"], kMiB);
  EXPECT_EQ(at1_5["last_oom_value"], 4);
  EXPECT_EQ(at1_5["trials"], 1);

  const nlohmann::json& replicated = fit["variants"][1];
  EXPECT_EQ(replicated["strategy"], "own");
  const std::string note =
      "workload 'fit_world_by_hand' holds no less as the world grows (rank 0: 8.00 MiB at world 1, 8.00 MiB at "
      "world 2, 8.00 MiB at world 64): its memory does not fall with the world (a rank that shards nothing holds "
      "what one process does), so only the first world size was tried";
  EXPECT_EQ(replicated["note"], note);
  for (const nlohmann::json& card : replicated["cards"]) {
    EXPECT_EQ(card["min_value"], nullptr);
    EXPECT_EQ(card["last_oom_value"], 1);
  }
  EXPECT_EQ(replicated["cards"][0]["trials"], 1);
  EXPECT_EQ(replicated["cards"][1]["trials"], 0);
  EXPECT_NE(r.out.find("by-hand on meta: the smallest parallel.world at which one rank fits each card (world sizes "
                       "1, 2, 4, then multiples of 8, searched 1..64; each workload's parallel.rank measured)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nreplicated: " + note + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" sharded (own) "), std::string::npos) << r.out;
  // The progress line counts the probes apart (fit/fit_world.h): sharded's world 2 holds 4 MiB, less
  // than world 1's 8: two trials, and its search runs; replicated's three hold 8 MiB each. On meta
  // the probe has no cap.
  EXPECT_NE(r.err.find("fit: sharded, probe (no cap): searched as usual; 2 trials, "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fit: replicated, probe (no cap): memory does not fall with the world, only parallel.world 1 "
                       "searched; 3 trials, "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("fit: sharded on cap 3.00 MiB: parallel.world 4 fits (peak 2.00 MiB), 2 does not; 3 trials, "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("   4 (2.00 MiB)   "), std::string::npos) << r.out;
}

TEST(FitWorldWorkload, AWorkloadVariantWithoutParallelOrWithARankTheFirstWorldLacksIsAUsageError) {
  testing::ScratchFolder folder("fit-world-workload-errors");
  const std::string file = folder.Write("by-hand.json", kByHand);
  nlohmann::json plain = nlohmann::json::parse(kByHand);  // the same workload, no variant with `parallel`
  plain["name"] = "plain";
  plain.erase("parallel");
  plain["variants"] = {{"a", nlohmann::json::object()}, {"b", nlohmann::json::object()}};
  const std::string hint =
      "fit varies parallel.world of a variant with `parallel`, e.g. \"parallel\": {\"world\": 2} (the workload's "
      "code reads it as ctx.WorldSize())\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> errors = {
      {{folder.Write("plain.json", plain.dump()), "--world"},
       "oomguard fit: --knob world: scenario 'plain' has no variant with `parallel` (variants: a, b); " + hint},
      {{file, "--world", "--variant", "alone"},
       "oomguard fit: --knob world: variant 'alone' (workload 'fit_world_by_hand') has no `parallel`: it runs as "
       "rank 0 of 1; " +
           hint},
      {{file, "--world", "--variant", "last"},
       "oomguard fit: --knob world: variant 'last' measures parallel.rank 3, which world 1 does not have (ranks are "
       "0 .. world - 1): search from --min 4 or above, or leave rank out (rank 0)\n"},
  };
  for (const auto& [args, message] : errors) {
    const testing::CliResult r = FitCli(args);
    EXPECT_EQ(r.code, kExitUsage) << message;
    EXPECT_EQ(r.err, message);
    EXPECT_EQ(r.out, "");
  }
  // From world 4 on, rank 3 is measured: its slice is rank 0's, 8 MiB / 4 at world 4.
  const testing::CliResult from4 = FitCli(
      {file, "--world", "--variant", "last", "--min", "4", "--max", "8", "--verdict", "allocated", "--cap", "3MiB"});
  EXPECT_EQ(from4.code, kExitOk) << from4.err;
  EXPECT_NE(from4.out.find("<= 4 (2.00 MiB)"), std::string::npos) << from4.out;
}

}  // namespace
}  // namespace oomguard
