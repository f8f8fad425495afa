// The cuda backend's cap arithmetic runs anywhere; the device tests skip without a GPU.
#include "allocators/cuda/cuda_cap.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "allocators/cards.h"
#include "allocators/device_account.h"

namespace oomguard {
namespace {

// What the caching allocator computes from a fraction: size_t(fraction * total).
int64_t AllowedBytes(double fraction, int64_t total) {
  return static_cast<int64_t>(static_cast<size_t>(fraction * static_cast<double>(total)));
}

TEST(CudaCap, FractionReproducesEveryCardsCapOnAnH200) {
  std::string error;
  const int64_t h200_total = FindCard("h200", &error)->total_bytes;
  for (const CardPreset& card : AllCards()) {
    const int64_t cap = card.allocator_cap_bytes();
    EXPECT_EQ(AllowedBytes(CudaMemoryFraction(cap, h200_total), h200_total), cap) << card.key;
  }
}

TEST(CudaCap, FractionNeverOvershootsOnAwkwardTotals) {
  for (int64_t total : {int64_t{1000003}, int64_t{85'100'068'864} + 7, int64_t{150'110'552'064} - 13}) {
    for (int64_t cap : {int64_t{1}, total / 3, total / 7 + 1, total - 1, total}) {
      const int64_t allowed = AllowedBytes(CudaMemoryFraction(cap, total), total);
      EXPECT_LE(allowed, cap) << cap << " of " << total;
      EXPECT_GE(allowed, cap - 1) << cap << " of " << total;
    }
  }
}

TEST(CudaCap, RejectsACapLargerThanTheDevice) {
  EXPECT_THROW(CudaMemoryFraction(2000, 1000), c10::Error);
  EXPECT_THROW(CudaMemoryFraction(0, 1000), c10::Error);
}

TEST(CudaCap, RuntimeVersionIsKnownWithoutAGpu) { EXPECT_EQ(CudaRuntimeVersion().rfind("13.", 0), 0u); }

TEST(CudaCapOnGpu, AllocationPastTheCapRaisesPyTorchsOutOfMemoryError) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no GPU visible (CUDA driver: " << CudaDriverVersion() << ")";
  const int64_t cap = int64_t{2} << 30;
  ApplyCudaCap(cap, 0);
  const auto cuda = at::TensorOptions().device(at::kCUDA).dtype(at::kByte);
  at::Tensor fits = at::empty({int64_t{1} << 30}, cuda);
  EXPECT_THROW(at::empty({int64_t{3} << 30}, cuda), c10::OutOfMemoryError);
}

TEST(CudaCap, OomMessageNamesTheSimulatedCardBeforePyTorchsMessage) {
  std::string error;
  const Limits t4 = LimitsForCard(*FindCard("t4", &error));
  const std::string pytorch =
      "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 139.80 GiB";
  EXPECT_EQ(SimulatedCudaOomMessage(t4, 20 * 1048576, t4.cap_bytes - 12 * 1048576, pytorch),
            "CUDA out of memory on the simulated NVIDIA T4 16GB (oomguard cap): tried to allocate 20.00 MiB with "
            "14.31 GiB live in tensors. The cap is 14.33 GiB (15381561344 bytes): the NVIDIA T4 16GB's 14.74 GiB "
            "minus 426.00 MiB of modelled CUDA context. PyTorch's caching allocator applies it to its reserved "
            "memory (tensors, rounding and cache). PyTorch's message, which names the physical GPU: " +
                pytorch);
  EXPECT_EQ(SimulatedCudaOomMessage(LimitsForCap(1LL << 30), 4096, 1LL << 20, "P"),
            "CUDA out of memory on a GPU capped at 1024.00 MiB (oomguard cap): tried to allocate 4.00 KiB with "
            "1024.00 KiB live in tensors. PyTorch's caching allocator applies it to its reserved memory (tensors, "
            "rounding and cache). PyTorch's message, which names the physical GPU: P");
}

}  // namespace
}  // namespace oomguard
