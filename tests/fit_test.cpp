// `oomguard fit` on real trials: the knob checks, the ledger invariant between trials, the command's
// usage errors, and the acceptance check of the issue: for a small model, the cpu backend at the same
// cap gives the same answer as meta.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "allocators/install.h"
#include "cli/cli.h"
#include "cli/fit_command.h"
#include "fit/fit_trial.h"
#include "cli_result.h"
#include "scenario/scenario_loader.h"
#include "scratch_folder.h"

namespace oomguard {
namespace {

// Three layers, cross entropy, Adam; the pitfall keeps its eval graphs (no_grad off), the fix does not.
constexpr const char* kSmallMlp = R"({
  "name": "small-mlp",
  "summary": "a small MLP for fit",
  "backends": ["cpu", "meta"],
  "model": {"layers": [{"kind": "linear", "in": 32, "out": 64}, {"kind": "relu"},
                       {"kind": "linear", "in": 64, "out": 64}, {"kind": "tanh"},
                       {"kind": "linear", "in": 64, "out": 4}]},
  "data": {"batch": 8, "shape": [32], "classes": 4},
  "loop": {"iterations": 2, "loss": "cross_entropy", "optimizer": {"kind": "adam"},
           "eval": {"batches": 2, "no_grad": true, "keep_outputs": true}},
  "variants": {"pitfall": {"loop": {"eval": {"no_grad": false}}}, "fixed": {}}
})";

// Token ids through attention: an OOM in its backward is what Note [A fresh thread per trial] is about.
constexpr const char* kTokens = R"({
  "name": "tokens",
  "summary": "token ids through attention",
  "model": {"layers": [{"kind": "embedding", "vocab": 100, "dim": 32},
                       {"kind": "attention", "dim": 32, "heads": 4},
                       {"kind": "linear", "in": 32, "out": 100}]},
  "data": {"batch": 2, "shape": [16], "dtype": "int64", "vocab": 100, "classes": 100},
  "loop": {"iterations": 1, "loss": "cross_entropy", "optimizer": {"kind": "sgd"}},
  "variants": {"base": {}}
})";

class FitCommandTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) { return folder_.Write(name, content); }
  std::string Path(const std::string& name) const { return folder_.path() + "/" + name; }
  static VariantSpec Variant(const std::string& text, const std::string& name) {
    Scenario s;
    std::string error;
    EXPECT_TRUE(LoadScenarioText(text, "test.json", &s, &error)) << error;
    for (const VariantSpec& v : s.variants) {
      if (v.name == name) return v;
    }
    ADD_FAILURE() << "no variant " << name;
    return {};
  }
  testing::ScratchFolder folder_{"fit"};
};

using testing::CliResult;

// `oomguard fit ARGS...`
CliResult Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "fit");
  return testing::Cli(std::move(args));
}

nlohmann::json ReadJson(const std::string& path) { return nlohmann::json::parse(testing::Contents(path)); }

TEST_F(FitCommandTest, CpuAndMetaGiveTheSameAnswerForASmallModel) {
  const std::string file = Write("small-mlp.json", kSmallMlp);
  const std::string cpu_json = Path("cpu.fit.json"), meta_json = Path("meta.fit.json");
  // On the tensors' bytes (--verdict allocated): caps this small hold no 2 MiB segment of the caching
  // allocator (ReservedVerdict.FitFindsTheBoundaryOnReservedBytes fits on reserved bytes).
  const CliResult cpu = Cli({file, "--backend", "cpu", "--cap", "1MiB", "--cap", "3MiB", "--json", cpu_json,
                             "--verdict", "allocated"});
  ASSERT_EQ(cpu.code, kExitOk) << cpu.err;
  const CliResult meta = Cli({file, "--backend", "meta", "--cap", "1MiB", "--cap", "3MiB", "--json", meta_json,
                              "--verdict", "allocated"});
  ASSERT_EQ(meta.code, kExitOk) << meta.err;
  const nlohmann::json c = ReadJson(cpu_json), m = ReadJson(meta_json);
  EXPECT_EQ(c["fit"]["backend"], "cpu");
  EXPECT_EQ(m["fit"]["backend"], "meta");
  EXPECT_EQ(c["fit"]["variants"], m["fit"]["variants"]);  // every value, peak, first OOM and trial count

  // And the answers are the boundary: the value fits its cap with the peak reported, one more does not.
  for (const nlohmann::json& v : c["fit"]["variants"]) {
    const VariantSpec spec = Variant(kSmallMlp, v["variant"]);
    for (const nlohmann::json& card : v["cards"]) {
      ASSERT_TRUE(card["max_value"].is_number()) << card;
      const int64_t value = card["max_value"], cap = card["cap_bytes"];
      EXPECT_EQ(card["first_oom_value"], value + 1);
      const TrialFunction trial = MakeFitTrial(spec, "batch", Backend::kCpu, 0);
      const Trial fits = trial(value, {"", cap});
      EXPECT_EQ(fits.outcome, Trial::Outcome::kFits);
      EXPECT_EQ(fits.peak_bytes, card["peak_bytes_at_max"]);
      EXPECT_EQ(trial(value + 1, {"", cap}).outcome, Trial::Outcome::kOom);
    }
  }
  EXPECT_NE(cpu.out.find("card   cap           pitfall             fixed               trials\n"), std::string::npos)
      << cpu.out;
}

TEST_F(FitCommandTest, JsonFileHasTheDocumentedFields) {
  const std::string file = Write("small-mlp.json", kSmallMlp);
  const std::string json = Path("fit.json");
  const CliResult r = Cli({file, "--variant", "fixed", "--cards", "t4", "--cap", "64KiB", "--max", "4096", "--json",
                           json, "--backend", "meta"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("results: " + json + "\n"), std::string::npos);
  const nlohmann::json j = ReadJson(json);
  EXPECT_EQ(j["schema_version"], 1);
  const nlohmann::json& fit = j["fit"];
  EXPECT_EQ(fit["scenario"], "small-mlp");
  EXPECT_EQ(fit["knob"], "batch");
  EXPECT_EQ(fit["knob_field"], "data.batch");
  EXPECT_EQ(fit["min"], 1);
  EXPECT_EQ(fit["max"], 4096);
  EXPECT_EQ(fit["iterations"], nullptr);
  ASSERT_EQ(fit["variants"].size(), 1u);
  const nlohmann::json& cards = fit["variants"][0]["cards"];
  ASSERT_EQ(cards.size(), 2u);
  EXPECT_EQ(cards[0]["card"], "t4");
  EXPECT_EQ(cards[0]["cap_bytes"], 15828254720 - 426 * 1048576);
  EXPECT_EQ(cards[0]["max_value"], 4096);  // --max fits a T4
  EXPECT_EQ(cards[0]["first_oom_value"], nullptr);
  EXPECT_EQ(cards[0]["error"], nullptr);
  EXPECT_EQ(cards[1]["card"], nullptr);       // a plain --cap
  EXPECT_EQ(cards[1]["max_value"], nullptr);  // 64 KiB holds less than the parameters and Adam
  EXPECT_EQ(cards[1]["peak_bytes_at_max"], nullptr);
  EXPECT_EQ(cards[1]["first_oom_value"], 1);
  EXPECT_EQ(cards[1]["trials"], 0);  // the T4's trial at 1 measured a peak above 64 KiB: no trial needed
}

TEST_F(FitCommandTest, SeqVariesTheSequenceLengthOfTokenIds) {
  const std::string file = Write("tokens.json", kTokens);
  const std::string json = Path("seq.fit.json");
  const CliResult r =
      Cli({file, "--knob", "seq", "--backend", "cpu", "--cap", "2MiB", "--json", json, "--verdict", "allocated"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const nlohmann::json card = ReadJson(json)["fit"]["variants"][0]["cards"][0];
  const int64_t seq = card["max_value"];
  const VariantSpec spec = Variant(kTokens, "base");
  const TrialFunction trial = MakeFitTrial(spec, "seq", Backend::kCpu, 0);
  EXPECT_EQ(trial(seq, {"", 2 * 1048576}).outcome, Trial::Outcome::kFits);
  EXPECT_EQ(trial(seq + 1, {"", 2 * 1048576}).outcome, Trial::Outcome::kOom);
  EXPECT_EQ(WithKnob(spec, "seq", seq).data.shape, std::vector<int64_t>{seq});
  EXPECT_EQ(WithKnob(spec, "seq", seq).data.batch, 2);
}

// The ledger is back where it was after every trial, whatever its outcome, on both backends.
TEST_F(FitCommandTest, LedgerReturnsToItsPreTrialLevel) {
  for (const std::string backend : {"cpu", "meta"}) {
    const at::Tensor kept = at::ones({1000}, at::TensorOptions().device(backend == "meta" ? at::kMeta : at::kCPU));
    const Ledger& ledger = (backend == "meta" ? MetaAccount() : CpuAccount()).ledger();
    const int64_t before = ledger.live_bytes();
    ASSERT_GE(before, 4000);
    const TrialFunction trial = MakeFitTrial(Variant(kSmallMlp, "pitfall"), "batch", BackendNamed(backend), 0);
    EXPECT_EQ(trial(64, {"", int64_t{1} << 30}).outcome, Trial::Outcome::kFits);
    EXPECT_EQ(ledger.live_bytes(), before) << backend;
    EXPECT_EQ(trial(4096, {"", 1 << 20}).outcome, Trial::Outcome::kOom);
    EXPECT_EQ(ledger.live_bytes(), before) << backend;
  }
}

// Note [A fresh thread per trial]: an OOM in attention's backward leaves graph pieces alive on the
// thread that ran it until that thread ends; a trial's own thread takes them with it.
TEST_F(FitCommandTest, AnOomInBackwardLeavesNothingAfterItsTrial) {
  const VariantSpec spec = WithKnob(Variant(kTokens, "base"), "seq", 2000);
  const VariantMeasurement unlimited = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kCpu, .limits = Limits{}, .iterations = 0, .timeline_points = 0});
  ASSERT_EQ(Name(unlimited.outcome), "pass");
  int64_t forward_peak = 0;
  for (const PhasePeak& p : unlimited.ledger.phase_peaks) {
    if (p.phase == "forward") forward_peak = p.peak_bytes;
  }
  ASSERT_EQ(unlimited.ledger.peak_phase, "backward");
  const int64_t cap = (forward_peak + unlimited.ledger.peak_bytes) / 2;
  const int64_t before = CpuAccount().ledger().live_bytes();
  int64_t left_on_thread = 0;
  std::thread([&] {
    const VariantMeasurement m = MeasureVariant(spec, VariantMeasureOptions{.backend = Backend::kCpu, .limits = LimitsForCap(cap), .iterations = 0, .timeline_points = 0});
    EXPECT_EQ(Name(m.outcome), "oom");
    EXPECT_EQ(m.oom->phase, "backward");
    left_on_thread = CpuAccount().ledger().live_bytes() - before;
  }).join();
  EXPECT_GT(left_on_thread, 0);  // LibTorch's behaviour, which the fresh thread works around
  EXPECT_EQ(CpuAccount().ledger().live_bytes(), before);
  const TrialFunction trial = MakeFitTrial(Variant(kTokens, "base"), "seq", Backend::kCpu, 0);
  EXPECT_EQ(trial(2000, {"", cap}).outcome, Trial::Outcome::kOom);  // and the check does not fire
  EXPECT_EQ(CpuAccount().ledger().live_bytes(), before);
}

TEST_F(FitCommandTest, ALeakStopsTheFitNamingVariantValueAndBytes) {
  std::vector<at::Tensor> leaked;
  const MeasureFunction leaky = [&](const VariantSpec& spec, const VariantMeasureOptions& options) {
    VariantMeasurement m = MeasureVariant(spec, options);
    leaked.push_back(at::empty({512}, at::TensorOptions().device(at::kMeta)));  // 2 KiB stay
    return m;
  };
  FitOptions options;
  options.scenario = Write("small-mlp.json", kSmallMlp);
  options.backend = "meta";
  options.cards = {"t4"};
  std::ostringstream out, err;
  EXPECT_EQ(FitCommand(options, out, err, leaky), kExitFailures);
  EXPECT_EQ(err.str(),
            "oomguard fit: variant 'pitfall' at batch 1 left 2048 bytes (+2.00 KiB) live in the meta ledger after "
            "its trial (0 bytes before it, 2048 after); later trials would measure on top of them\n");
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(leaked.size(), 1u);
}

// A warning of the measurement (here one every trial repeats) reaches the table and the JSON once per
// variant: a fit on numbers the backend says are not cpu's says so.
TEST_F(FitCommandTest, TheTrialsWarningsAreReportedOncePerVariant) {
  const MeasureFunction warned = [](const VariantSpec& spec, const VariantMeasureOptions& options) {
    VariantMeasurement m = MeasureVariant(spec, options);
    m.warnings.push_back("m.pt: aten::gru (in module gru) runs on meta through PyTorch's native per-step path");
    return m;
  };
  FitOptions options;
  options.scenario = Write("small-mlp.json", kSmallMlp);
  options.backend = "meta";
  options.cards = {"t4"};
  options.variants = {"fixed"};
  options.json_path = Path("warned.fit.json");
  std::ostringstream out, err;
  ASSERT_EQ(FitCommand(options, out, err, warned), kExitOk) << err.str();
  const std::string line =
      "fixed: warning: m.pt: aten::gru (in module gru) runs on meta through PyTorch's native per-step path\n";
  ASSERT_NE(out.str().find(line), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find(line), out.str().rfind(line)) << out.str();
  EXPECT_EQ(ReadJson(options.json_path)["fit"]["variants"][0]["warnings"],
            nlohmann::json::array({"m.pt: aten::gru (in module gru) runs on meta through PyTorch's native per-step "
                                   "path"}));
}

TEST_F(FitCommandTest, AnErrorOutcomeIsReportedForItsVariantAndExitsOne) {
  FitOptions options;
  std::string with_broken = kSmallMlp;
  // In-place edit of tanh's output, which tanh saved for backward: autograd's version check fails.
  with_broken.replace(with_broken.find("\"fixed\": {}"), 11,
                      "\"fixed\": {}, \"broken\": {\"pitfalls\": {\"inplace\": {\"target\": \"output\", "
                      "\"layer\": 3, \"op\": \"mul_\"}}}");
  options.scenario = Write("broken.json", with_broken);
  options.backend = "meta";
  options.variants = {"broken"};
  options.caps = {"1GiB"};
  std::ostringstream out, err;
  ASSERT_EQ(FitCommand(options, out, err), kExitFailures) << err.str();
  EXPECT_NE(out.str().find("-      1024.00 MiB   error    1\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\nbroken: at batch 1: error:inplace-saved-tensor: "), std::string::npos) << out.str();
}

TEST_F(FitCommandTest, KnobsTheScenarioCannotVaryAreUsageErrors) {
  const std::string file = Write("small-mlp.json", kSmallMlp);
  const CliResult seq = Cli({file, "--knob", "seq"});
  EXPECT_EQ(seq.code, kExitUsage);
  EXPECT_EQ(seq.err,
            "oomguard fit: --knob seq: variant 'pitfall' has no sequence axis: data.shape [32] of float32 holds "
            "features; seq varies data.shape[0] of token ids (data.dtype int64) or of samples shaped [seq, "
            "features]\n");
  EXPECT_EQ(Cli({file, "--knob", "width"}).code, kExitUsage);
  std::string error;
  EXPECT_FALSE(CheckKnob("width", Variant(kSmallMlp, "fixed"), 1, 8, &error));
  EXPECT_EQ(error,
            "--knob width: unknown knob; known: batch (data.batch), seq (data.shape[0]), world (parallel.world), and "
            "for a workload scenario its integer knobs");
  EXPECT_TRUE(CheckKnob("seq", Variant(kTokens, "base"), 1, 1048576, &error));
}

TEST_F(FitCommandTest, UnknownCardsVariantsAndScenariosAreUsageErrors) {
  const std::string file = Write("small-mlp.json", kSmallMlp);
  const CliResult card = Cli({file, "--cards", "t4,x100"});
  EXPECT_EQ(card.code, kExitUsage);
  EXPECT_EQ(card.err.rfind("oomguard fit: --cards: unknown card 'x100'; known cards: t4, l4, a10, ", 0), 0u)
      << card.err;
  EXPECT_EQ(Cli({file, "--cards", "a100"}).err,
            "oomguard fit: --cards: card 'a100' is ambiguous: use a100-40gb or a100-80gb\n");
  EXPECT_EQ(Cli({file, "--variant", "fixd"}).err,
            "oomguard fit: --variant fixd: scenario 'small-mlp' has no such variant; did you mean 'fixed'? "
            "(variants: pitfall, fixed)\n");
  EXPECT_EQ(Cli({"small-mpl", "--paths", folder_.path()}).err,
            "oomguard fit: no scenario named 'small-mpl'; did you mean 'small-mlp'? (known: small-mlp)\n");
  EXPECT_EQ(Cli({file, "--min", "10", "--max", "5"}).err, "oomguard fit: --min 10 is larger than --max 5\n");
  EXPECT_EQ(Cli({file, "--cap", "0"}).err, "oomguard fit: --cap: the cap must be larger than 0 bytes\n");
  EXPECT_EQ(Cli({file, "--json", "/no/such/folder/fit.json"}).err,
            "oomguard fit: --json /no/such/folder/fit.json: no folder /no/such/folder\n");
  EXPECT_EQ(Cli({file, "--min", "0"}).code, kExitUsage);
  EXPECT_EQ(Cli({file, "--backend", "cuda"}).code, kExitUsage);
}

TEST_F(FitCommandTest, BackendsTheScenarioDoesNotListOrTheHostCannotHoldAreUsageErrors) {
  const std::string tokens = Write("tokens.json", kTokens);
  EXPECT_EQ(Cli({tokens, "--knob", "seq", "--backend", "meta"}).err,
            "oomguard fit: --backend meta: scenario 'tokens' does not run there (its backends: cpu)\n");
  const CliResult host = Cli({tokens, "--knob", "seq", "--cap", "1024TiB"});  // auto: cpu, since meta is not listed
  EXPECT_EQ(host.code, kExitUsage);
  EXPECT_EQ(host.err.rfind("oomguard fit: --backend cpu: trials up to cap 1048576.00 GiB would allocate", 0), 0u)
      << host.err;
}

// D31 (issue 35): fit had no timeout; a forward that never returned printed nothing until an outside
// timeout. A trial past --timeout ends the fit with exit 1 and names the trial (Note [A trial that does
// not end], fit/fit_trial.h). The trial is the misbehaving workload's hang, as in run's TIMEOUT test
// (warm_children_test.cpp); the fit runs as a program of its own, since it exits with the trial stuck.
TEST(FitTimeout, ATrialThatNeverEndsStopsTheFitNamingIt) {
  testing::ScratchFolder folder("fit-timeout");
  const std::string scenario = folder.Write("hang.json", R"({
  "name": "hangs",
  "summary": "a forward that never returns",
  "workload": "misbehaves",
  "knobs": {"how": "hang"},
  "loop": {"iterations": 1},
  "variants": {"hang": {}}
})");
  const std::string err = folder.path() + "/err.txt";
  const std::string command = std::string("'") + MISBEHAVING_EXE + "' fit '" + scenario +
                              "' --knob size --backend cpu --cap 64MiB --max 4 --timeout 1 > /dev/null 2> '" + err + "'";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("fit: variant 'hang' at size 1 on cap 64.00 MiB: timed out after 1 s (--timeout)\n"),
            std::string::npos)
      << text.str();
}

}  // namespace
}  // namespace oomguard
