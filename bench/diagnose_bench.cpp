// What watching a run for pitfalls costs (diagnose/run_observer.h): one catalog variant measured with
// the detectors against the same variant without them, alternated in paired rounds (Note [Paired
// measurement]); the ratio is the price of `diagnose = true`, the default. Cases: the cpu MLP of
// peak-location (many small ops) and the 7B decoder step on meta (the largest graph the catalog has),
// screened (meta's default, Note [Screen, then watch]) and with every operator watched at once.
#include "allocators/install.h"
#include "backends/backend.h"
#include "bench/bench_util.h"
#include "bench/catalog_steps.h"
#include "workload/workload.h"

namespace oomguard::bench {
namespace {

void BM_Diagnose(benchmark::State& state, const std::string& scenario, const std::string& variant, Backend backend,
                 VariantMeasureOptions::Watching watching) {
  InstallTrackingAllocators();
  const VariantSpec spec = CatalogVariant(scenario, variant);
  VariantMeasureOptions watched;
  watched.backend = backend;
  watched.watching = watching;
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

using Watching = VariantMeasureOptions::Watching;
BENCHMARK_CAPTURE(BM_Diagnose, cpu_mlp, std::string("peak-location"), std::string("mlp_adam"), Backend::kCpu,
                  Watching::kByBackend)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0);
BENCHMARK_CAPTURE(BM_Diagnose, meta_llm_7b, std::string("llm-7b"), std::string("step"), Backend::kMeta,
                  Watching::kByBackend)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0);
BENCHMARK_CAPTURE(BM_Diagnose, meta_llm_7b_watched, std::string("llm-7b"), std::string("step"), Backend::kMeta,
                  Watching::kAtOnce)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0);

}  // namespace
}  // namespace oomguard::bench
