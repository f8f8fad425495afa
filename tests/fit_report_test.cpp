// The fit table and JSON file against golden files, and the progress lines, from a fixed FitResults: no
// machine, time or LibTorch enters them.
#include "reports/fit_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "golden_file.h"
#include "reports/fit_progress.h"

namespace oomguard {
namespace {

constexpr int64_t kT4Cap = 15381561344, kA10gCap = 23237492736, kPlainCap = 1073741824;

CardFit Card(std::string card, int64_t cap, std::optional<int64_t> max_value, int64_t peak,
             std::optional<int64_t> first_oom, int64_t trials, std::string error = "") {
  CardFit c;
  c.card = std::move(card);
  c.cap_bytes = cap;
  c.max_value = max_value;
  c.peak_bytes_at_max = peak;
  c.first_oom_value = first_oom;
  c.trials = trials;
  c.error = std::move(error);
  return c;
}

// Every kind of cell: a boundary, nothing fits, --max fits, an error (with quotes, for the JSON).
FitResults SampleFit() {
  FitResults r;
  r.scenario = "sample";
  r.backend = "meta";
  r.knob = "batch";
  r.knob_field = "data.batch";
  r.min_value = 1;
  r.max_value = 65536;
  r.duration_ms = 1234.5;
  const std::string error = "at batch 1: error:meta-kernel-missing: \"aten::index_select\" has no Meta kernel";
  r.variants = {
      {"pitfall",
       {Card("t4", kT4Cap, 3071, 15380000000, 3072, 12), Card("a10g", kA10gCap, 4607, 23236000000, 4608, 26),
        Card("", kPlainCap, std::nullopt, 0, 1, 0)},
       {}},
      {"fixed",
       {Card("t4", kT4Cap, 65536, 9000000000, std::nullopt, 0),
        Card("a10g", kA10gCap, 65536, 9000000000, std::nullopt, 17), Card("", kPlainCap, 112, 1073000000, 113, 7)},
       {}},
      {"broken",
       {Card("t4", kT4Cap, std::nullopt, 0, std::nullopt, 0, error),
        Card("a10g", kA10gCap, std::nullopt, 0, std::nullopt, 1, error),
        Card("", kPlainCap, std::nullopt, 0, std::nullopt, 0, error)},
       {"net.pt: aten::gru (in module gru) runs on meta through PyTorch's native per-step path"}},
  };
  return r;
}

CardFit WorldCard(std::string card, int64_t cap, std::optional<int64_t> min_value, int64_t peak,
                  std::optional<int64_t> last_oom, int64_t trials) {
  CardFit c = Card(std::move(card), cap, std::nullopt, 0, std::nullopt, trials);
  c.min_value = min_value;
  c.peak_bytes_at_min = peak;
  c.last_oom_value = last_oom;
  return c;
}

// --knob world: a boundary, nothing fits up to --max, world 1 fits, ddp's one trial with its note, a
// column whose variant is not named after its strategy, and a variant left out.
FitResults SampleWorldFit() {
  FitResults r;
  r.scenario = "llm";
  r.backend = "meta";
  r.knob = "world";
  r.knob_field = "parallel.world";
  r.smallest = true;
  r.gpus_per_node = 8;
  r.left_out = {"step", "flash"};
  r.min_value = 1;
  r.max_value = 4096;
  r.duration_ms = 2500;
  VariantFit zero2{
      "zero2",
      {WorldCard("t4", kT4Cap, std::nullopt, 0, 4096, 13), WorldCard("a10g", kA10gCap, 24, 23000000000, 16, 7)}};
  zero2.strategy = "zero2";
  zero2.why_none =
      "at world 4096 on t4 (cap 14.33 GiB) rank 0 runs out of memory in setup, with 13.04 GiB live (parameters 13.04 "
      "GiB) and 13.04 GiB more asked";
  zero2.steady_state = "from iteration 2: adamw keeps state from its first step on";
  VariantFit sharded{"sharded",
                     {WorldCard("t4", kT4Cap, 1, 15000000000, std::nullopt, 1),
                      WorldCard("a10g", kA10gCap, 1, 15000000000, std::nullopt, 0)}};
  sharded.strategy = "zero1";
  VariantFit ddp{
      "ddp",
      {WorldCard("t4", kT4Cap, std::nullopt, 0, 1, 0), WorldCard("a10g", kA10gCap, 1, 20000000000, std::nullopt, 1)}};
  ddp.strategy = "ddp";
  ddp.note = "ddp replicates parameters, gradients and optimizer state on every rank";
  r.variants = {zero2, sharded, ddp};
  return r;
}

TEST(FitResults, WorldTableMatchesGolden) {
  std::ostringstream out;
  WriteFitTable(SampleWorldFit(), out);
  testing::ExpectMatchesGolden("sample-world.fit.txt", out.str());
}

TEST(FitResults, WorldJsonMatchesGolden) {
  testing::ExpectMatchesGolden("sample-world.fit.json", FitJsonText(SampleWorldFit()));
}

TEST(FitProgress, AWorldCardSaysTheSmallestThatFitsAndTheLargestThatDoesNot) {
  std::ostringstream err;
  FitProgress progress(err, /*terminal=*/false, "parallel.world", /*smallest=*/true);
  const FitResults r = SampleWorldFit();
  progress.OnCardDone("zero2", r.variants[0].cards[1], 4100);
  progress.OnCardDone("zero2", r.variants[0].cards[0], 900);
  progress.OnCardDone("sharded", r.variants[1].cards[0], 100);
  EXPECT_EQ(
      err.str(),
      "fit: zero2 on a10g (cap 21.64 GiB): parallel.world 24 fits (peak 21.42 GiB), 16 does not; 7 trials, 4.1 s\n"
      "fit: zero2 on t4 (cap 14.33 GiB): not even parallel.world 4096 fits; 13 trials, 0.9 s\n"
      "fit: sharded on t4 (cap 14.33 GiB): parallel.world 1 fits (peak 13.97 GiB), the smallest searched; 1 "
      "trial, 0.1 s\n");
}

// A workload's probe (Note [A workload whose memory does not fall], fit/fit_world.h): each trial says
// which of the three it is, quiet-timed as a search's off a terminal, and a line ends the probe with
// its trials and time, before the cards' lines count and time their searches alone.
TEST(FitProgress, AWorkloadsProbeTrialsAreShownAndCountedApartFromTheCards) {
  std::ostringstream err;
  FitProgress progress(err, /*terminal=*/false, "parallel.world", /*smallest=*/true);
  const FitResults r = SampleWorldFit();
  progress.OnProbeTrial("replicated", "no cap", 1, 3, 1, "fits", 100);     // nothing: under 10 s
  progress.OnProbeTrial("replicated", "no cap", 2, 3, 2, "fits", 10000);   // a long probe says where it is
  progress.OnProbeTrial("replicated", "no cap", 3, 3, 64, "fits", 12000);  // 2 s after that line: nothing
  progress.OnProbeDone("replicated", "no cap", 3, /*does_not_fall=*/true, 1, 12000);
  progress.OnTrial("replicated", "t4 (cap 14.33 GiB)", 1, 1, "fits", 9999);  // the card's clock: nothing
  progress.OnProbeDone("sharded", "cap 21.64 GiB", 2, /*does_not_fall=*/false, 1, 300);
  progress.OnProbeDone("tiny", "no cap", 1, /*does_not_fall=*/false, 1, 50);
  progress.OnCardDone("sharded", r.variants[1].cards[0], 100);
  progress.Finish();
  EXPECT_EQ(err.str(),
            "fit: replicated, probe (no cap): trial 2 of 3, parallel.world 2 fits; 10.0 s so far\n"
            "fit: replicated, probe (no cap): memory does not fall with the world, only parallel.world 1 searched; 3 "
            "trials, 12.0 s\n"
            "fit: sharded, probe (cap 21.64 GiB): searched as usual; 2 trials, 0.3 s\n"
            "fit: tiny, probe (no cap): searched as usual; 1 trial, 0.1 s\n"
            "fit: sharded on t4 (cap 14.33 GiB): parallel.world 1 fits (peak 13.97 GiB), the smallest searched; 1 "
            "trial, 0.1 s\n");
}

TEST(FitProgress, AProbeTrialIsDrawnOnATerminal) {
  std::ostringstream err;
  FitProgress progress(err, /*terminal=*/true, "parallel.world", /*smallest=*/true);
  progress.OnProbeTrial("replicated", "no cap", 2, 3, 2, "does not fit", 0);
  progress.OnProbeDone("replicated", "no cap", 2, /*does_not_fall=*/true, 1, 100);
  progress.Finish();
  EXPECT_EQ(err.str(),
            "\r\033[Kfit: replicated, probe (no cap): trial 2 of 3, parallel.world 2 does not fit"
            "\r\033[Kfit: replicated, probe (no cap): memory does not fall with the world, only parallel.world 1 "
            "searched; 2 trials, 0.1 s"
            "\r\033[K");
}

TEST(FitResults, TableMatchesGolden) {
  std::ostringstream out;
  WriteFitTable(SampleFit(), out);
  testing::ExpectMatchesGolden("sample.fit.txt", out.str());
}

TEST(FitResults, JsonMatchesGolden) { testing::ExpectMatchesGolden("sample.fit.json", FitJsonText(SampleFit())); }

TEST(FitResults, JsonRoundTripsTheNumbersAndNulls) {
  const nlohmann::json j = nlohmann::json::parse(FitJsonText(SampleFit()));
  EXPECT_EQ(j["schema_version"], kFitSchemaVersion);
  const nlohmann::json& pitfall = j["fit"]["variants"][0]["cards"];
  EXPECT_EQ(pitfall[0]["peak_bytes_at_max"], 15380000000);
  EXPECT_EQ(pitfall[2]["card"], nullptr);
  EXPECT_EQ(pitfall[2]["max_value"], nullptr);
  EXPECT_EQ(j["fit"]["variants"][2]["cards"][1]["error"],
            "at batch 1: error:meta-kernel-missing: \"aten::index_select\" has no Meta kernel");
}

TEST(FitProgress, PlainLinesOnePerFinishedCardAndOneEveryTenQuietSeconds) {
  std::ostringstream err;
  FitProgress progress(err, /*terminal=*/false, "data.batch");
  const FitResults r = SampleFit();
  progress.OnTrial("pitfall", "t4 (cap 14.33 GiB)", 1, 1, "fits", 9999);   // nothing: under 10 s since the card began
  progress.OnTrial("pitfall", "t4 (cap 14.33 GiB)", 2, 2, "fits", 10000);  // a long search says where it is
  progress.OnTrial("pitfall", "t4 (cap 14.33 GiB)", 3, 4, "does not fit", 19000);  // 9 s after that line: nothing
  progress.OnCardDone("pitfall", r.variants[0].cards[0], 25000);
  progress.OnCardDone("pitfall", r.variants[0].cards[2], 0);
  progress.OnCardDone("fixed", r.variants[1].cards[1], 40);
  progress.OnCardDone("broken", r.variants[2].cards[1], 10);
  progress.Finish();
  EXPECT_EQ(err.str(),
            "fit: pitfall on t4 (cap 14.33 GiB): trial 2, data.batch 2 fits; 10.0 s so far\n"
            "fit: pitfall on t4 (cap 14.33 GiB): data.batch 3071 fits (peak 14.32 GiB), 3072 does not; 12 trials, "
            "25.0 s\n"
            "fit: pitfall on cap 1024.00 MiB: not even data.batch 1 fits; 0 trials, 0.0 s\n"
            "fit: fixed on a10g (cap 21.64 GiB): data.batch 65536 fits (peak 8.38 GiB), the largest searched; 17 "
            "trials, 0.0 s\n"
            "fit: broken on a10g (cap 21.64 GiB): at batch 1: error:meta-kernel-missing: \"aten::index_select\" has "
            "no Meta kernel; 1 trial, 0.0 s\n");
}

TEST(FitProgress, OneRedrawnLineOnATerminal) {
  std::ostringstream err;
  FitProgress progress(err, /*terminal=*/true, "data.batch");
  progress.OnTrial("pitfall", "t4 (cap 14.33 GiB)", 3, 4, "does not fit", 0);
  progress.OnCardDone("pitfall", SampleFit().variants[0].cards[0], 100);
  progress.Finish();
  EXPECT_EQ(err.str(),
            "\r\033[Kfit: pitfall on t4 (cap 14.33 GiB): trial 3, data.batch 4 does not fit"
            "\r\033[Kfit: pitfall on t4 (cap 14.33 GiB): data.batch 3071 fits (peak 14.32 GiB), 3072 does not; 12 "
            "trials, 0.1 s"
            "\r\033[K");
}

}  // namespace
}  // namespace oomguard
