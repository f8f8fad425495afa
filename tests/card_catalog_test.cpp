// The catalog as a card (`--backend meta --kernels cuda`, README "Meta as a card"): every scenario
// passes, its checks for cpu's kernels skipped with the reason and its checks for CUDA's judged (Note
// [Whose kernels a check is for], model/scenario.h). A check that encodes cpu's bytes and fails on a
// card's is a bug in the catalog, not in the code a user measures: this is the test that says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "run/runner.h"
#include "scenario/scenario_loader.h"

namespace oomguard {
namespace {

const std::string kCatalog = std::string(OOMGUARD_SOURCE_DIR) + "/scenarios";

// The catalog's checks (relations and each variant's) written for `kernels`, by scenario.
int CountChecksFor(const std::vector<Scenario>& scenarios, const std::string& kernels) {
  int count = 0;
  for (const Scenario& s : scenarios) {
    for (const ScenarioCheck& c : s.checks) count += c.kernels == kernels;
    for (const auto& [variant, expectation] : s.expectations) {
      for (const ScenarioCheck& c : expectation.checks) count += c.kernels == kernels;
    }
  }
  return count;
}

std::vector<Scenario> LoadCatalog(std::vector<std::string>* files) {
  std::string error;
  EXPECT_TRUE(FindScenarioFiles({kCatalog}, files, &error)) << error;
  std::vector<Scenario> scenarios;
  for (const std::string& path : *files) {
    Scenario s;
    EXPECT_TRUE(LoadScenarioFile(path, &s, &error)) << error;
    scenarios.push_back(std::move(s));
  }
  return scenarios;
}

RunResults RunAsACard(const std::vector<std::string>& paths, const std::string& card) {
  RunOptions options;
  options.paths = paths;
  options.backend = "meta";
  options.backend_given = true;
  options.kernels = "cuda";
  options.card = card;
  options.jobs = 2;
  RunResults results;
  std::string error;
  EXPECT_TRUE(RunScenarios(options, OOMGUARD_EXE, nullptr, &results, &error)) << error;
  return results;
}

// Every scenario PASS, every measurement a card's kernels', and the checks skipped (gradients aside)
// exactly those for cpu's kernels, each saying so; none for CUDA's skipped. Returns how many.
int ExpectEveryScenarioPasses(const RunResults& results, const std::string& card) {
  int skipped = 0;
  for (const ScenarioResult& s : results.scenarios) {
    SCOPED_TRACE(s.name + " at " + (card.empty() ? "its own card" : card));
    std::string why = s.error;
    for (const VariantResult& v : s.variants) {
      for (const std::string& reason : v.reasons) why += "\n" + v.name + ": " + reason;
    }
    for (const CheckResult& c : s.checks) why += c.holds || c.skipped ? "" : "\n" + c.explanation;
    EXPECT_EQ(s.code, ResultCode::kPass) << why;
    std::vector<const CheckResult*> checks;
    for (const CheckResult& c : s.checks) checks.push_back(&c);
    for (const VariantResult& v : s.variants) {
      EXPECT_TRUE(v.measurement.has_value()) << v.name;
      if (!v.measurement) continue;
      EXPECT_EQ(v.measurement->kernels.rfind("cuda sm_", 0), 0u) << v.name << ": " << v.measurement->kernels;
      for (const CheckResult& c : v.checks) checks.push_back(&c);
    }
    for (const CheckResult* c : checks) {
      // Gradients have no values on meta, whoever's kernels: those checks are skipped on any meta run.
      if (!c->skipped || c->explanation.ends_with(": skipped on meta (gradients have no values there)")) continue;
      ++skipped;
      EXPECT_NE(c->explanation.find(": skipped (for cpu kernels; measured with cuda sm_"), std::string::npos)
          << c->explanation;
    }
  }
  return skipped;
}

// At each scenario's own card (t4 for most; the large models' A100, H100, H200), as
// `oomguard run --backend meta --kernels cuda` runs the catalog.
TEST(CardCatalog, EveryScenarioPassesAtItsOwnCard) {
  std::vector<std::string> files;
  const std::vector<Scenario> scenarios = LoadCatalog(&files);
  const RunResults results = RunAsACard({kCatalog}, "");
  EXPECT_EQ(results.scenarios.size(), scenarios.size());
  EXPECT_EQ(ExpectEveryScenarioPasses(results, ""), CountChecksFor(scenarios, "cpu"));
  EXPECT_GT(CountChecksFor(scenarios, "cuda"), 0);
}

// The scenarios sized for a T4 at each other card the catalog names: a bigger card's reductions split
// across more SMs and stage other scratch, which the card's checks bound rather than state. (The
// large models need their own card's memory: at a T4 they OOM, with either kernels.)
TEST(CardCatalog, TheT4ScenariosPassAtEveryCardTheCatalogNames) {
  std::vector<std::string> files;
  const std::vector<Scenario> scenarios = LoadCatalog(&files);
  std::vector<std::string> t4_files, cards;
  std::vector<Scenario> t4;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    if (scenarios[i].card == "t4") {
      t4_files.push_back(files[i]);
      t4.push_back(scenarios[i]);
    } else if (!scenarios[i].card.empty() && std::find(cards.begin(), cards.end(), scenarios[i].card) == cards.end()) {
      cards.push_back(scenarios[i].card);
    }
  }
  ASSERT_GE(t4_files.size(), 15u);
  ASSERT_EQ(cards.size(), 3u);  // a100-80gb, h100, h200
  for (const std::string& card : cards) {
    const RunResults results = RunAsACard(t4_files, card);
    EXPECT_EQ(results.scenarios.size(), t4_files.size());
    EXPECT_EQ(ExpectEveryScenarioPasses(results, card), CountChecksFor(t4, "cpu"));
  }
}

}  // namespace
}  // namespace oomguard
