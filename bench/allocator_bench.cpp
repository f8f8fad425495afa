// An allocate+free pair through oomguard's CpuTrackingAllocator versus LibTorch's default CPU
// allocator, at 64 B, 4 KiB and 1 MiB, measured in alternating rounds (Note [Paired measurement]).
// Target: at most 1.10x at 4 KiB. BM_AllocFreeUnderTheVerdict adds what every cpu run now has: the
// caching allocator's model deciding each request (Note [One decision point], device_account.h).
#include <optional>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/cuda_model_feed.h"
#include "allocators/install.h"
#include "bench/bench_util.h"

namespace oomguard::bench {
namespace {

constexpr int kPairsPerRound = 256;

void AllocFree(c10::Allocator* allocator, size_t nbytes) {
  for (int i = 0; i < kPairsPerRound; ++i) {
    c10::DataPtr p = allocator->allocate(nbytes);
    benchmark::DoNotOptimize(p.get());
  }
}

void AllocFreeRounds(benchmark::State& state, bool verdict) {
  static CpuTrackingAllocator tracking(CpuAccount());
  // A cap and a phase, as the runner sets them, so the measured path is the real one.
  const int64_t cap = int64_t{64} << 30;
  ScopedLimits limits(CpuAccount(), LimitsForCap(cap));
  CudaModelFeed feed(cap, {}, ModelRole::kDecides);
  std::optional<ScopedModelFeed> attach;
  if (verdict) attach.emplace(CpuAccount(), &feed);
  CpuAccount().ledger().SetPhase("forward");
  c10::Allocator* baseline = c10::GetDefaultCPUAllocator();
  const auto nbytes = static_cast<size_t>(state.range(0));
  PairedRounds rounds;
  for (auto _ : state) {
    rounds.Round([&] { AllocFree(baseline, nbytes); }, [&] { AllocFree(&tracking, nbytes); }, kPairsPerRound);
  }
  rounds.Publish(state);
}

void BM_AllocFree(benchmark::State& state) { AllocFreeRounds(state, /*verdict=*/false); }
void BM_AllocFreeUnderTheVerdict(benchmark::State& state) { AllocFreeRounds(state, /*verdict=*/true); }

BENCHMARK(BM_AllocFree)->Arg(64)->Arg(4096)->Arg(1 << 20)->MinTime(1.0);
BENCHMARK(BM_AllocFreeUnderTheVerdict)->Arg(64)->Arg(4096)->Arg(1 << 20)->MinTime(1.0);

}  // namespace
}  // namespace oomguard::bench
