// A training step of the catalog's 7B and 70B decoders on meta: what `oomguard run` does for one
// variant (MeasureVariant: model built on meta, phases, ledger, layer trace, transfer counter) against
// the same step in plain LibTorch code on the same model sizes, alternated in paired rounds
// (Note [Paired measurement]). Targets: the harness's step under 100 ms (7B) and 1 s (70B).
#include "allocators/install.h"
#include "backends/backend.h"
#include "bench/bench_util.h"
#include "bench/catalog_steps.h"
#include "workload/workload.h"

namespace oomguard::bench {
namespace {

void BM_MetaStep(benchmark::State& state, const std::string& scenario_name) {
  InstallTrackingAllocators();
  const BackendDriver& meta = GetBackend(Backend::kMeta);
  const std::unique_ptr<BackendSession> session = meta.Open(Limits{});  // registers the Meta kernels
  const VariantSpec spec = CatalogVariant(scenario_name, "step");
  VariantMeasureOptions options;
  options.backend = Backend::kMeta;
  options.iterations = 1;
  PairedRounds rounds;
  for (auto _ : state) {
    rounds.Round([&] { PlainStep(spec, meta.device()); },
                 [&] {
                   const VariantMeasurement m = MeasureVariant(spec, options);
                   if (m.outcome.kind != Outcome::kPass) state.SkipWithError(m.error.c_str());
                 },
                 1);
  }
  rounds.Publish(state);
}

BENCHMARK_CAPTURE(BM_MetaStep, llm_7b, std::string("llm-7b"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_MetaStep, llm_70b, std::string("llm-70b"))->Unit(benchmark::kMillisecond)->MinTime(5.0);

}  // namespace
}  // namespace oomguard::bench
