// Scenario texts for the loader's tests (scenario_loader*_test.cpp): the example of
// scenarios/FORMAT.md, a small valid scenario to vary, and loading that expects success or an error.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "scenario/scenario_loader.h"

namespace oomguard::testing {

// The annotated example of scenarios/FORMAT.md, verbatim (TheFormatPageShowsTheTestedExample checks it).
inline constexpr const char* kExample = R"json({
  // Identity: the catalog, reports and baselines know the scenario by its name.
  "name": "forgotten-no-grad",
  "summary": "Evaluation without no_grad keeps every batch's autograd graph alive",
  "teach": [
    "Outside torch::NoGradGuard, every forward records a graph that holds the activations it saved.",
    "Keeping the eval outputs (to compute metrics later) keeps those graphs, one per batch, until evaluation ends.",
    "Fix: evaluate under torch::NoGradGuard (or torch::InferenceMode), or keep output.detach()."
  ],
  "backends": ["cpu", "meta", "cuda"],
  "card": "t4",

  // The base configuration: every variant starts from it.
  "model": {
    "layers": [
      {"kind": "linear", "in": 256, "out": 1024},
      {"kind": "gelu"},
      {"kind": "linear", "in": 1024, "out": 1024},
      {"kind": "gelu"},
      {"kind": "linear", "in": 1024, "out": 10}
    ]
  },
  "data": {"batch": 512, "shape": [256], "classes": 10},
  "loop": {
    "iterations": 2,
    "loss": "cross_entropy",
    "optimizer": {"kind": "adam", "lr": 0.001},
    // 8 evaluation batches after each iteration, every output kept for the metrics.
    "eval": {"batches": 8, "no_grad": true, "keep_outputs": true}
  },

  // Each variant is a JSON merge patch over the base: only what differs.
  "variants": {
    "pitfall": {"loop": {"eval": {"no_grad": false}}},
    "fixed": {}
  },

  // What each variant must show. Both run to completion; neither grows from iteration to iteration.
  "expect": {
    "pitfall": {"outcome": "pass", "checks": ["phase_peak.eval > phase_peak.forward"]},
    "fixed": {"outcome": "pass", "leak": false, "checks": ["phase_peak.eval < phase_peak.forward"]}
  },

  // Relations between variants: 8 kept graphs cost several training forwards' worth of saved tensors.
  "checks": ["pitfall.phase_peak.eval - fixed.phase_peak.eval >= 4 * fixed.forward_saved_bytes"]
}
)json";

// Loads `text` as the file "s.json", failing the test on an error.
inline Scenario Load(const std::string& text) {
  Scenario scenario;
  std::string error;
  EXPECT_TRUE(LoadScenarioText(text, "s.json", &scenario, &error)) << error;
  return scenario;
}

// The error of loading `text` as "s.json", failing the test if it loads.
inline std::string LoadError(const std::string& text) {
  Scenario scenario;
  std::string error;
  EXPECT_FALSE(LoadScenarioText(text, "s.json", &scenario, &error)) << text;
  return error;
}

// A small valid scenario with `extra` top-level keys before its variants (which `extra` may replace).
inline std::string With(const std::string& extra, const std::string& variants = R"("variants": {"a": {}})") {
  std::string text = R"({"name": "t", "summary": "s", )";
  if (extra.find("\"model\"") == std::string::npos) {
    text += R"("model": {"layers": [{"kind": "linear", "in": 4, "out": 2}]}, )";
  }
  if (extra.find("\"data\"") == std::string::npos) text += R"("data": {"shape": [4]}, )";
  if (!extra.empty()) text += extra + ", ";
  return text + variants + "}";
}

}  // namespace oomguard::testing
