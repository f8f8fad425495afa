// One small training step on cpu (MLP forward, backward, Adam step) with LibTorch's default CPU
// allocator and with oomguard's tracking allocator, alternating step by step on the same model
// (Note [Paired measurement]). Target: at most 1.02x.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include "allocators/cpu_tracking_allocator.h"
#include "allocators/install.h"
#include "bench/bench_util.h"

namespace oomguard::bench {
namespace {

void BM_TrainingStep(benchmark::State& state) {
  static CpuTrackingAllocator tracking(CpuAccount());
  ScopedLimits limits(CpuAccount(), LimitsForCap(int64_t{64} << 30));
  c10::Allocator* baseline = c10::GetDefaultCPUAllocator();

  SetCpuAllocator(baseline);
  torch::manual_seed(0);
  torch::nn::Sequential mlp(torch::nn::Linear(512, 1024), torch::nn::ReLU(), torch::nn::Linear(1024, 1024),
                            torch::nn::ReLU(), torch::nn::Linear(1024, 10));
  torch::optim::Adam adam(mlp->parameters(), torch::optim::AdamOptions(1e-3));
  const at::Tensor x = at::randn({64, 512});
  const at::Tensor y = at::randint(0, 10, {64}, at::kLong);
  auto step = [&](c10::Allocator* allocator) {
    SetCpuAllocator(allocator);
    adam.zero_grad();  // set_to_none: gradients are allocated again every step, as in real training
    at::Tensor loss = at::cross_entropy_loss(mlp->forward(x), y);
    loss.backward();
    adam.step();
  };
  step(baseline);  // Adam's state appears on the first step
  PairedRounds rounds;
  for (auto _ : state) {
    rounds.Round([&] { step(baseline); }, [&] { step(&tracking); }, 1);
  }
  rounds.Publish(state);
  SetCpuAllocator(baseline);
}

BENCHMARK(BM_TrainingStep)->Unit(benchmark::kMillisecond)->MinTime(5.0);

}  // namespace
}  // namespace oomguard::bench
