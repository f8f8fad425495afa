// Instruction counts of the regions the overhead goals are about, for ratios that do not move from
// run to run (Note [Counting instructions]). Run it under callgrind through ci/instructions.sh, which
// prints each pair's counts and ratio; alone it says so and exits 2.
//
// Note [Counting instructions]: time ratios on the 2-core machine swing by 10-20% between runs, so a
// goal of 2% or 5% cannot be judged by time. Callgrind counts the instructions a region executes,
// the same on every run of the same binary and input. Each region runs with collection on and
// nothing else (CALLGRIND_TOGGLE_COLLECT, with --collect-atstart=no) and is dumped under its name
// (CALLGRIND_DUMP_STATS_AT, which also zeroes the counters); ci/instructions.sh reads the dumps'
// totals. A pair is a baseline and a candidate: "alloc/4096/default" and "alloc/4096/tracking". What
// an instruction count misses (cache misses, page faults, lock contention) the time benchmarks
// (oomguard_bench) still show.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/install.h"
#include "backends/backend.h"
#include "bench/bench_util.h"
#include "bench/catalog_steps.h"
#include "workload/workload.h"

namespace oomguard::bench {
namespace {

// Counts `f` alone, under `name`.
template <typename F>
void Region(const std::string& name, F&& f) {
  CALLGRIND_TOGGLE_COLLECT;
  f();
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_DUMP_STATS_AT(name.c_str());
}

// alloc/SIZE/{default,tracking}: 1000 allocate+free pairs, after 100 of each to warm both up.
void AllocatorPairs(CpuTrackingAllocator& tracking) {
  c10::Allocator* baseline = c10::GetDefaultCPUAllocator();
  auto pairs = [](c10::Allocator* allocator, size_t nbytes, int n) {
    for (int i = 0; i < n; ++i) {
      c10::DataPtr p = allocator->allocate(nbytes);
      benchmark::DoNotOptimize(p.get());
    }
  };
  for (const size_t nbytes : {size_t{64}, size_t{4096}, size_t{1} << 20}) {
    pairs(baseline, nbytes, 100);
    pairs(&tracking, nbytes, 100);
    const std::string size = std::to_string(nbytes);
    Region("alloc/" + size + "/default", [&] { pairs(baseline, nbytes, 1000); });
    Region("alloc/" + size + "/tracking", [&] { pairs(&tracking, nbytes, 1000); });
  }
}

// mlp_step/{default,tracking}: two MLP training steps (forward, backward, Adam) as BM_TrainingStep
// takes them, each side after a step of its own, so that what a step frees is its own allocator's.
void MlpSteps(CpuTrackingAllocator& tracking) {
  c10::Allocator* baseline = c10::GetDefaultCPUAllocator();
  torch::manual_seed(0);
  torch::nn::Sequential mlp(torch::nn::Linear(512, 1024), torch::nn::ReLU(), torch::nn::Linear(1024, 1024),
                            torch::nn::ReLU(), torch::nn::Linear(1024, 10));
  torch::optim::Adam adam(mlp->parameters(), torch::optim::AdamOptions(1e-3));
  const at::Tensor x = at::randn({64, 512});
  const at::Tensor y = at::randint(0, 10, {64}, at::kLong);
  auto step = [&] {
    adam.zero_grad();
    at::cross_entropy_loss(mlp->forward(x), y).backward();
    adam.step();
  };
  for (auto [side, allocator] :
       {std::pair<const char*, c10::Allocator*>{"default", baseline}, {"tracking", &tracking}}) {
    SetCpuAllocator(allocator);
    step();
    Region(std::string("mlp_step/") + side, [&] {
      step();
      step();
    });
  }
  SetCpuAllocator(baseline);
}

// meta_7b/{plain,harness_bare,harness,harness_watched}: the 7B step as plain LibTorch calls
// (BM_MetaStep's), through MeasureVariant without the detectors, with them (the default: screened, Note
// [Screen, then watch]), and with every operator watched at once.
void MetaSteps() {
  const BackendDriver& meta = GetBackend(Backend::kMeta);
  const std::unique_ptr<BackendSession> session = meta.Open(Limits{});  // registers the Meta kernels
  const VariantSpec spec = CatalogVariant("llm-7b", "step");
  VariantMeasureOptions watched;
  watched.backend = Backend::kMeta;
  watched.iterations = 1;
  VariantMeasureOptions bare = watched;
  bare.diagnose = false;
  VariantMeasureOptions at_once = watched;
  at_once.watching = VariantMeasureOptions::Watching::kAtOnce;
  auto plain = [&] { PlainStep(spec, meta.device()); };
  plain();
  (void)MeasureVariant(spec, watched);
  Region("meta_7b/plain", plain);
  Region("meta_7b/harness_bare", [&] { (void)MeasureVariant(spec, bare); });
  Region("meta_7b/harness", [&] { (void)MeasureVariant(spec, watched); });
  Region("meta_7b/harness_watched", [&] { (void)MeasureVariant(spec, at_once); });
}

// cpu_mlp_variant/{bare,watched}: a catalog variant (peak-location/mlp_adam, one iteration) measured
// without and with the detectors.
void CpuVariant() {
  const VariantSpec spec = CatalogVariant("peak-location", "mlp_adam");
  VariantMeasureOptions watched;
  watched.backend = Backend::kCpu;
  watched.iterations = 1;
  VariantMeasureOptions bare = watched;
  bare.diagnose = false;
  (void)MeasureVariant(spec, watched);
  Region("cpu_mlp_variant/bare", [&] { (void)MeasureVariant(spec, bare); });
  Region("cpu_mlp_variant/watched", [&] { (void)MeasureVariant(spec, watched); });
}

}  // namespace
}  // namespace oomguard::bench

int main(int argc, char** argv) {
  using namespace oomguard;
  // An argument: only the region families it names ("meta_7b", "alloc,mlp_step"); none: all of them.
  const std::string only = argc > 1 ? std::string(",") + argv[1] + "," : "";
  auto wanted = [&](const char* family) {
    return only.empty() || only.find(std::string(",") + family + ",") != std::string::npos;
  };
  if (!RUNNING_ON_VALGRIND) {
    std::fprintf(stderr, "oomguard_instructions counts instructions under callgrind: run ci/instructions.sh\n");
    return 2;
  }
  at::set_num_threads(1);  // as a measuring child runs
  {
    // A cap and a phase, as the runner sets them, so that the tracking allocator's path is the real one.
    static CpuTrackingAllocator tracking(CpuAccount());
    ScopedLimits limits(CpuAccount(), LimitsForCap(int64_t{64} << 30));
    CpuAccount().ledger().SetPhase("forward");
    if (wanted("alloc")) bench::AllocatorPairs(tracking);
    if (wanted("mlp_step")) bench::MlpSteps(tracking);
  }
  InstallTrackingAllocators();
  if (wanted("cpu_mlp_variant")) bench::CpuVariant();
  if (wanted("meta_7b")) bench::MetaSteps();
  return 0;
}
