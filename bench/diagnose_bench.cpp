// What watching a run for pitfalls costs (diagnose/run_observer.h): one catalog variant measured with
// the detectors against the same variant without them, alternated in paired rounds (Note [Paired
// measurement]); the ratio is the price of `diagnose = true`, the default. Cases: the cpu MLP of
// peak-location (many small ops) and the 7B decoder step on meta (the largest graph the catalog has).
#include "allocators/install.h"
#include "backends/backend.h"
#include "bench/bench_util.h"
#include "scenario/scenario_loader.h"
#include "workload/workload.h"

#ifndef OOMGUARD_CATALOG_DIR
#error "the bench target defines OOMGUARD_CATALOG_DIR"
#endif

namespace oomguard::bench {
namespace {

VariantSpec VariantOf(const std::string& scenario_name, const std::string& variant) {
  Scenario scenario;
  std::string error;
  if (!LoadScenarioFile(std::string(OOMGUARD_CATALOG_DIR) + "/" + scenario_name + ".json", &scenario, &error)) {
    throw std::runtime_error(error);
  }
  for (const VariantSpec& v : scenario.variants) {
    if (v.name == variant) return v;
  }
  throw std::runtime_error(scenario_name + " has no variant named " + variant);
}

void BM_Diagnose(benchmark::State& state, const std::string& scenario, const std::string& variant, Backend backend) {
  InstallTrackingAllocators();
  const VariantSpec spec = VariantOf(scenario, variant);
  VariantMeasureOptions watched;
  watched.backend = backend;
  watched.iterations = 1;
  VariantMeasureOptions bare = watched;
  bare.diagnose = false;
  PairedRounds rounds;
  for (auto _ : state) {
    rounds.Round([&] { benchmark::DoNotOptimize(MeasureVariant(spec, bare)); },
                 [&] {
                   const VariantMeasurement m = MeasureVariant(spec, watched);
                   if (m.outcome.kind != Outcome::kPass) state.SkipWithError(m.error.c_str());
                 },
                 1);
  }
  rounds.Publish(state);
}

BENCHMARK_CAPTURE(BM_Diagnose, cpu_mlp, std::string("peak-location"), std::string("mlp_adam"), Backend::kCpu)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0);
BENCHMARK_CAPTURE(BM_Diagnose, meta_llm_7b, std::string("llm-7b"), std::string("step"), Backend::kMeta)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0);

}  // namespace
}  // namespace oomguard::bench
