// What the card-mode tests share (card_attention_test.cpp, card_workspace_test.cpp, card_loss_test.cpp,
// card_pool_test.cpp): meta tensor options, a measurement of one call on the meta ledger (with cpu's or
// a card's kernels), and a fixture with oomguard's Meta kernels registered (Note [Meta as a card]).
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "allocators/install.h"
#include "backends/meta/kernel_target.h"
#include "backends/meta/kernels/meta_kernels.h"

namespace oomguard::testing {

inline const at::TensorOptions kMeta = at::TensorOptions().device(at::kMeta);

struct Measured {
  int64_t allocated = 0;  // bytes of every allocation while it ran
  int64_t live = 0;       // live bytes it left
  int64_t peak = 0;       // highest live bytes above the start
};

template <typename F>
Measured MeasureOnMeta(F&& f) {
  Ledger& ledger = MetaAccount().ledger();
  const int64_t before = ledger.live_bytes();
  ledger.ResetStatistics();
  f();
  const LedgerStats stats = ledger.Snapshot();
  return {stats.allocated_bytes_total, ledger.live_bytes() - before, stats.peak_bytes - before};
}

// MeasureOnMeta with the Meta kernels mirroring `target`'s (a card's, or cpu's).
template <typename F>
Measured MeasureWithKernels(const KernelTarget& target, F&& f) {
  ScopedKernelTarget scope(target);
  return MeasureOnMeta(f);
}

class CardModeTest : public ::testing::Test {
 protected:
  void SetUp() override { RegisterMetaKernels(); }
};

}  // namespace oomguard::testing
