// The cpu tracking allocator as LibTorch code meets it: through c10's registry and ATen ops.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "allocators/cards.h"
#include "allocators/cpu_tracking_allocator.h"
#include "allocators/install.h"
#include "base/byte_size.h"

namespace oomguard {
namespace {

class CpuAllocatorTest : public testing::Test {
 protected:
  void SetUp() override {
    ledger().ResetStatistics();
    base_ = ledger().live_bytes();
  }
  static Ledger& ledger() { return CpuAccount().ledger(); }
  int64_t Live() const { return ledger().live_bytes() - base_; }
  int64_t base_ = 0;
};

TEST_F(CpuAllocatorTest, IsTheAllocatorC10HandsOut) { EXPECT_TRUE(TrackingAllocatorsInstalled()); }

TEST_F(CpuAllocatorTest, CountsTheExactBytesOfATensorSequence) {
  {
    at::Tensor a = at::empty({1000}, at::kFloat);  // 4000 bytes
    at::Tensor b = at::empty({250}, at::kDouble);  // 2000 bytes
    EXPECT_EQ(Live(), 6000);
    at::Tensor c = at::add(a, a);  // a fresh 4000-byte output, no temporaries
    EXPECT_EQ(Live(), 10000);
    b.reset();
    EXPECT_EQ(Live(), 8000);
    at::Tensor d = at::empty({0}, at::kFloat);  // no storage bytes, no allocation
    EXPECT_EQ(Live(), 8000);
  }
  LedgerStats stats = ledger().Snapshot();
  EXPECT_EQ(Live(), 0);
  EXPECT_EQ(stats.peak_bytes - base_, 10000);
  EXPECT_EQ(stats.alloc_count, 3);
  EXPECT_EQ(stats.allocated_bytes_total, 10000);
}

TEST_F(CpuAllocatorTest, CapAllowsTheBoundaryByteAndRefusesOneMore) {
  ScopedLimits limits(CpuAccount(), LimitsForCap(ledger().live_bytes() + 4096));
  at::Tensor fits = at::empty({1024}, at::kFloat);  // exactly the cap
  EXPECT_EQ(Live(), 4096);
  try {
    at::empty({1}, at::kByte);
    FAIL() << "a byte over the cap was allocated";
  } catch (const c10::OutOfMemoryError& e) {
    const int64_t cap = ledger().live_bytes();
    EXPECT_EQ(std::string(e.what_without_backtrace()),
              "CPU out of memory (oomguard cap). Tried to allocate 1 bytes. The cap is " + FormatBytes(cap) + " (" +
                  std::to_string(cap) + " bytes), of which 0 bytes is free. Of the capped memory " + FormatBytes(cap) +
                  " is live in tensors.");
  }
  EXPECT_EQ(Live(), 4096);
  EXPECT_EQ(ledger().Snapshot().failed_count, 1);
}

TEST(OutOfMemoryMessage, NamesTheSimulatedCardCapAndLiveBytes) {
  std::string error;
  Limits t4 = LimitsForCard(*FindCard("t4", &error));
  EXPECT_EQ(OutOfMemoryMessage("cpu", t4, 20 * 1048576, t4.cap_bytes - 12 * 1048576, nullptr),
            "CPU out of memory (oomguard cap). Tried to allocate 20.00 MiB. Simulated NVIDIA T4 16GB has a total "
            "capacity of 14.74 GiB, of which 426.00 MiB is the modelled CUDA context; the cap is 14.33 GiB "
            "(15381561344 bytes), of which 12.00 MiB is free. Of the capped memory 14.31 GiB is live in tensors.");
  InjectedFailure injected{7, 4096, "backward", "phase=backward,nth=2"};
  EXPECT_EQ(OutOfMemoryMessage("meta", LimitsForCap(1LL << 30), 4096, 1LL << 20, &injected),
            "META out of memory (injected by oomguard: phase=backward,nth=2, allocation #7 in phase backward). Tried "
            "to allocate 4.00 KiB. The cap is 1024.00 MiB (1073741824 bytes), of which 1023.00 MiB is free. Of the "
            "capped memory 1024.00 KiB is live in tensors.");
}

TEST_F(CpuAllocatorTest, HostAllocationsStayOutOfTheLedger) {
  at::Tensor host;
  {
    HostAllocationScope scope;
    host = at::empty({1000}, at::kFloat);
  }
  EXPECT_EQ(Live(), 0);
  EXPECT_TRUE(IsHostAllocation(host.storage().data_ptr()));
  at::Tensor device = at::empty({1000}, at::kFloat);
  EXPECT_FALSE(IsHostAllocation(device.storage().data_ptr()));
  device.copy_(host);
  EXPECT_EQ(Live(), 4000);
  host.reset();  // freed outside any scope: still not refunded, since it was never charged
  EXPECT_EQ(Live(), 4000);
}

TEST_F(CpuAllocatorTest, WindowPeakRestartsAtTheCurrentLiveBytes) {
  at::Tensor a = at::empty({1000}, at::kFloat);
  { at::Tensor b = at::empty({500}, at::kFloat); }
  EXPECT_EQ(ledger().TakeWindowPeak() - base_, 6000);
  { at::Tensor c = at::empty({100}, at::kFloat); }
  EXPECT_EQ(ledger().TakeWindowPeak() - base_, 4400);
  EXPECT_EQ(ledger().TakeWindowPeak() - base_, 4000);
}

TEST_F(CpuAllocatorTest, RemembersTheLastRefusedRequest) {
  ScopedLimits limits(CpuAccount(), LimitsForCap(ledger().live_bytes() + 100));
  ledger().SetPhase("backward");
  at::Tensor held = at::empty({60}, at::kByte);
  EXPECT_THROW(at::empty({1000}, at::kByte), c10::OutOfMemoryError);
  const DeviceAccount::Refusal refusal = CpuAccount().last_refusal();
  EXPECT_EQ(refusal.requested_bytes, 1000);
  EXPECT_EQ(refusal.live_bytes - base_, 60);
  EXPECT_EQ(refusal.phase, "backward");
  EXPECT_FALSE(refusal.injected);
}

TEST_F(CpuAllocatorTest, SatisfiesMkldnnRawAllocateContract) {
  c10::Allocator* allocator = c10::GetAllocator(c10::DeviceType::CPU);
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  void* p = allocator->raw_allocate(100);  // asserts data == context inside c10
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(Live(), 100);
  allocator->raw_deallocate(p);
  EXPECT_EQ(Live(), 0);
}

TEST_F(CpuAllocatorTest, InjectsTheNthAllocationAndRecordsIt) {
  Limits limits;
  limits.faults = std::make_shared<FaultInjector>(NthAllocation(2));
  ScopedLimits scoped(CpuAccount(), limits);
  ledger().SetPhase("forward");
  at::Tensor first = at::empty({10}, at::kFloat);
  EXPECT_THROW(at::empty({20}, at::kFloat), c10::OutOfMemoryError);
  at::Tensor third = at::empty({30}, at::kFloat);
  const std::vector<InjectedFailure> failures = limits.faults->failures();
  ASSERT_EQ(failures.size(), 1u);
  const InjectedFailure& f = failures[0];
  EXPECT_EQ(f.allocation_index, 2);
  EXPECT_EQ(f.bytes, 80);
  EXPECT_EQ(f.phase, "forward");
  EXPECT_EQ(Live(), 40 + 120);
}

TEST_F(CpuAllocatorTest, InjectsOnlyInTheNamedPhaseAndFromTheMinimumSize) {
  std::vector<std::unique_ptr<FaultPolicy>> clauses;
  clauses.push_back(InPhase("backward"));
  clauses.push_back(MinimumSize(4000));
  Limits limits;
  limits.faults = std::make_shared<FaultInjector>(AllOf(std::move(clauses)));
  ScopedLimits scoped(CpuAccount(), limits);
  ledger().SetPhase("forward");
  at::Tensor big_forward = at::empty({1000}, at::kFloat);  // 4000 bytes, wrong phase
  ledger().SetPhase("backward");
  at::Tensor small_backward = at::empty({999}, at::kFloat);  // 3996 bytes, too small
  EXPECT_THROW(at::empty({1000}, at::kFloat), c10::OutOfMemoryError);
  EXPECT_EQ(limits.faults->failures().size(), 1u);
  EXPECT_EQ(limits.faults->failures()[0].allocation_index, 3);
}

TEST_F(CpuAllocatorTest, ScopedLimitsNestAndRestore) {
  EXPECT_EQ(CpuAccount().limits().cap_bytes, Ledger::kUnlimited);
  {
    ScopedLimits outer(CpuAccount(), LimitsForCap(1 << 30));
    EXPECT_EQ(CpuAccount().limits().cap_bytes, 1 << 30);
    {
      Limits inner_limits = LimitsForCap(ledger().live_bytes() + 100);
      inner_limits.faults = std::make_shared<FaultInjector>(MinimumSize(1));
      ScopedLimits inner(CpuAccount(), inner_limits);
      EXPECT_THROW(at::empty({1}, at::kByte), c10::OutOfMemoryError);
    }
    EXPECT_EQ(CpuAccount().limits().cap_bytes, 1 << 30);
    EXPECT_EQ(CpuAccount().limits().faults, nullptr);
    at::Tensor fine = at::empty({1000}, at::kByte);  // inner cap and fault are gone
  }
  EXPECT_EQ(CpuAccount().limits().cap_bytes, Ledger::kUnlimited);
}

TEST_F(CpuAllocatorTest, ConcurrentAllocationFromSeveralThreadsBalances) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < kRounds; ++i) {
        at::Tensor x = at::empty({256}, at::kFloat);  // 1024 bytes
      }
    });
  }
  for (auto& thread : threads) thread.join();
  LedgerStats stats = ledger().Snapshot();
  EXPECT_EQ(Live(), 0);
  EXPECT_EQ(stats.alloc_count, kThreads * kRounds);
  EXPECT_EQ(stats.allocated_bytes_total, int64_t{kThreads} * kRounds * 1024);
  EXPECT_LE(stats.peak_bytes - base_, kThreads * 1024);
}

// Note [Small blocks]: a freed small block is handed out again, and the ledger still sees each
// request's own bytes.
TEST_F(CpuAllocatorTest, HandsOutAFreedSmallBlockAgainAndChargesTheRequestedBytes) {
  const void* first = nullptr;
  {
    at::Tensor a = at::empty({16}, at::kFloat);  // 64 bytes
    first = a.data_ptr();
    EXPECT_EQ(Live(), 64);
  }
  EXPECT_EQ(Live(), 0);
  at::Tensor b = at::empty({13}, at::kFloat);  // 52 bytes: the same size class, the same block
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(Live(), 52);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data_ptr()) % 64, 0u);
  at::Tensor c = at::empty({257}, at::kByte);  // past the small classes: a block of its own
  EXPECT_NE(c.data_ptr(), first);
  EXPECT_EQ(Live(), 52 + 257);
  b.reset();
  c.reset();
  EXPECT_EQ(Live(), 0);
  EXPECT_EQ(ledger().Snapshot().allocated_bytes_total, 64 + 52 + 257);
}

TEST_F(CpuAllocatorTest, SmallBlocksOfEveryClassKeepTheirBytesApart) {
  // Each size from 1 to 256 bytes, all alive at once, written end to end: no two share memory.
  std::vector<at::Tensor> tensors;
  int64_t total = 0;
  for (int64_t n = 1; n <= 256; ++n) {
    tensors.push_back(at::full({n}, static_cast<int>(n % 251), at::kByte));
    total += n;
  }
  EXPECT_EQ(Live(), total);
  for (int64_t n = 1; n <= 256; ++n) {
    const at::Tensor& t = tensors[static_cast<size_t>(n - 1)];
    EXPECT_EQ(t.eq(static_cast<int>(n % 251)).all().item<bool>(), true) << n << " bytes";
  }
  tensors.clear();
  EXPECT_EQ(Live(), 0);
}

TEST_F(CpuAllocatorTest, CountsLiveHostBlocksAndTellsTheListenerOfEachChange) {
  std::vector<bool> told;
  SetHostBlocksListener([&told](bool any_alive) { told.push_back(any_alive); });
  {
    at::Tensor first, second;
    {
      HostAllocationScope scope;
      first = at::empty({8}, at::kFloat);
      second = at::empty({8}, at::kFloat);
    }
    EXPECT_EQ(LiveHostBlocks(), 2);
    at::Tensor device = at::empty({8}, at::kFloat);  // not a host block
    EXPECT_EQ(LiveHostBlocks(), 2);
    first.reset();
    EXPECT_EQ(LiveHostBlocks(), 1);
  }
  EXPECT_EQ(LiveHostBlocks(), 0);
  SetHostBlocksListener({});
  // At once (none alive), at the first block, after the last.
  EXPECT_EQ(told, (std::vector<bool>{false, true, false}));
}

TEST_F(CpuAllocatorTest, IntraOpThreadsAllocateThroughTheLedger) {
  at::set_num_threads(2);
  at::Tensor a = at::rand({256, 256});
  at::Tensor b = at::rand({256, 256});
  const int64_t before = Live();
  at::Tensor c = at::mm(a, b);
  EXPECT_GE(Live() - before, 256 * 256 * 4);
  c.reset();
  a.reset();
  b.reset();
  EXPECT_EQ(Live(), 0);
}

}  // namespace
}  // namespace oomguard
