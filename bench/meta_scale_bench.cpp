// A training step of the catalog's 7B and 70B decoders on meta: what `oomguard run` does for one
// variant (MeasureVariant: model built on meta, phases, ledger, layer trace, transfer counter) against
// the same step in plain LibTorch code on the same model sizes, alternated in paired rounds
// (Note [Paired measurement]). Targets: the harness's step under 100 ms (7B) and 1 s (70B).
#include <torch/optim/adamw.h>

#include "allocators/install.h"
#include "backends/backend.h"
#include "bench/bench_util.h"
#include "nn/layer_net.h"
#include "nn/scalar_type.h"
#include "scenario/scenario_loader.h"
#include "workload/workload.h"

#ifndef OOMGUARD_CATALOG_DIR
#error "the bench target defines OOMGUARD_CATALOG_DIR"
#endif

namespace oomguard::bench {
namespace {

VariantSpec StepOf(const std::string& scenario_name) {
  Scenario scenario;
  std::string error;
  if (!LoadScenarioFile(std::string(OOMGUARD_CATALOG_DIR) + "/" + scenario_name + ".json", &scenario, &error)) {
    throw std::runtime_error(error);
  }
  for (const VariantSpec& v : scenario.variants) {
    if (v.name == "step") return v;
  }
  throw std::runtime_error(scenario_name + " has no variant named step");
}

// The step without oomguard's harness: the same layers, loss and AdamW, straight LibTorch calls.
void BareStep(const VariantSpec& spec, const c10::Device& device) {
  const at::TensorOptions options = at::TensorOptions().device(device).dtype(ScalarTypeOf(spec.model.dtype));
  LayerNet net(spec.model, options);
  torch::optim::AdamW adamw(net.parameters(), torch::optim::AdamWOptions(1e-4));
  const at::Tensor ids = at::empty({spec.data.batch, spec.data.shape.at(0)}, options.dtype(at::kLong));
  const at::Tensor logits = net.Forward(ids, /*training=*/true);
  at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), ids.reshape({-1})).backward();
  adamw.step();
}

void BM_MetaStep(benchmark::State& state, const std::string& scenario_name) {
  InstallTrackingAllocators();
  const BackendDriver& meta = GetBackend(Backend::kMeta);
  const std::unique_ptr<BackendSession> session = meta.Open(Limits{});  // registers the Meta kernels
  const VariantSpec spec = StepOf(scenario_name);
  VariantMeasureOptions options;
  options.backend = Backend::kMeta;
  options.iterations = 1;
  PairedRounds rounds;
  for (auto _ : state) {
    rounds.Round([&] { BareStep(spec, meta.device()); },
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
