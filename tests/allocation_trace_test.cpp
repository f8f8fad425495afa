// The allocation trace on its own (events, labels, the ring, synthetic addresses) and as the cpu and
// meta tracking allocators feed it.
#include "allocators/allocation_trace.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "allocators/install.h"

namespace oomguard {
namespace {

constexpr uint64_t kSyntheticBase = uint64_t{1} << 32;

TEST(AllocationTrace, RecordsAllocationsFreesAndRefusalsWithWhereTheyHappened) {
  AllocationTrace trace;
  trace.Enable();
  trace.SetLocation("the forward of layer 0:linear");
  trace.RecordAlloc(0x100, 10, "forward");
  trace.RecordAlloc(0x200, 20, "forward");
  trace.SetLocation("");
  trace.RecordFree(0x100, 10, "backward");
  trace.RecordFree(0x999, 5, "backward");  // allocated before the trace: not recorded
  trace.RecordOom(64, 7, "backward");
  const TraceRecord r = trace.Record();
  ASSERT_EQ(r.events.size(), 4u);
  EXPECT_EQ(r.events[0].action, TraceAction::kAlloc);
  EXPECT_EQ(r.events[0].address, 0x100u);
  EXPECT_EQ(r.events[0].bytes, 10);
  EXPECT_EQ(r.events[0].label, 0);
  EXPECT_EQ(r.events[1].address, 0x200u);
  EXPECT_EQ(r.events[2].action, TraceAction::kFree);
  EXPECT_EQ(r.events[2].address, 0x100u);
  EXPECT_EQ(r.events[2].bytes, 10);
  EXPECT_EQ(r.events[2].label, 1);
  EXPECT_EQ(r.events[3].action, TraceAction::kOom);
  EXPECT_EQ(r.events[3].bytes, 64);
  EXPECT_EQ(r.events[3].free_bytes, 7);
  EXPECT_EQ(r.events[3].label, 1);
  EXPECT_LE(r.events[0].time_us, r.events[3].time_us);
  ASSERT_EQ(r.labels.size(), 2u);
  EXPECT_EQ(r.labels[0].phase, "forward");
  EXPECT_EQ(r.labels[0].location, "the forward of layer 0:linear");
  EXPECT_EQ(r.labels[1].phase, "backward");
  EXPECT_EQ(r.labels[1].location, "");
  ASSERT_EQ(r.live.size(), 1u);
  EXPECT_EQ(r.live[0].address, 0x200u);
  EXPECT_EQ(r.live[0].bytes, 20);
  EXPECT_EQ(r.dropped_events, 0);
}

TEST(AllocationTrace, KeepsTheMostRecentEventsAndEveryLiveBlock) {
  AllocationTrace trace;
  trace.Enable(3);
  for (uint64_t a = 1; a <= 5; ++a) trace.RecordAlloc(a * 16, 8, "setup");
  const TraceRecord r = trace.Record();
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[0].address, 48u);
  EXPECT_EQ(r.events[1].address, 64u);
  EXPECT_EQ(r.events[2].address, 80u);
  EXPECT_EQ(r.dropped_events, 2);
  ASSERT_EQ(r.live.size(), 5u);
  EXPECT_EQ(r.live[0].address, 16u);  // sorted by address
  trace.Enable(3);                    // a new recording starts empty
  EXPECT_TRUE(trace.Record().events.empty());
  EXPECT_TRUE(trace.Record().live.empty());
}

TEST(AllocationTrace, SyntheticAddressesNeverOverlapAndStart512Aligned) {
  AllocationTrace trace;
  EXPECT_EQ(trace.NextSyntheticAddress(1), kSyntheticBase);
  EXPECT_EQ(trace.NextSyntheticAddress(1000), kSyntheticBase + 512);
  EXPECT_EQ(trace.NextSyntheticAddress(0), kSyntheticBase + 512 + 1024);
  EXPECT_EQ(trace.NextSyntheticAddress(512), kSyntheticBase + 512 + 1024 + 512);
}

// Enables an account's trace for one test and turns it off after.
class ScopedTrace {
 public:
  explicit ScopedTrace(DeviceAccount& account) : trace_(account.trace()) { trace_.Enable(); }
  ~ScopedTrace() { trace_.Disable(); }
  TraceRecord Record() const { return trace_.Record(); }

 private:
  AllocationTrace& trace_;
};

TEST(AllocationTraceFeed, CpuBlocksHaveTheirRealAddresses) {
  CpuAccount().ledger().SetPhase("forward");
  ScopedTrace trace(CpuAccount());
  uint64_t address = 0;
  {
    at::Tensor t = at::empty({256}, at::kFloat);  // 1024 bytes
    address = reinterpret_cast<uint64_t>(t.data_ptr());
    CpuAccount().ledger().SetPhase("backward");
  }
  const TraceRecord r = trace.Record();
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].action, TraceAction::kAlloc);
  EXPECT_EQ(r.events[0].address, address);
  EXPECT_EQ(r.events[0].bytes, 1024);
  EXPECT_EQ(r.labels.at(r.events[0].label).phase, "forward");
  EXPECT_EQ(r.events[1].action, TraceAction::kFree);
  EXPECT_EQ(r.events[1].address, address);
  EXPECT_EQ(r.events[1].bytes, 1024);
  EXPECT_EQ(r.labels.at(r.events[1].label).phase, "backward");
  EXPECT_TRUE(r.live.empty());
}

TEST(AllocationTraceFeed, MetaBlocksGetSyntheticAddressesTheirFreesFind) {
  ScopedTrace trace(MetaAccount());
  const int64_t live_before = MetaAccount().ledger().live_bytes();
  {
    at::Tensor a = at::empty({256}, at::TensorOptions().device(at::kMeta));  // 1024 bytes
    at::Tensor b = at::empty({3}, at::TensorOptions().device(at::kMeta));    // 12 bytes
    EXPECT_EQ(MetaAccount().ledger().live_bytes() - live_before, 1036);
    const TraceRecord r = trace.Record();
    ASSERT_EQ(r.live.size(), 2u);
    EXPECT_EQ(r.live[1].address - r.live[0].address, 1024u);
    a.reset();
    EXPECT_EQ(MetaAccount().ledger().live_bytes() - live_before, 12);
  }
  const TraceRecord r = trace.Record();
  ASSERT_EQ(r.events.size(), 4u);
  EXPECT_EQ(r.events[2].action, TraceAction::kFree);
  EXPECT_EQ(r.events[2].address, r.events[0].address);  // a, freed first
  EXPECT_EQ(r.events[2].bytes, 1024);
  EXPECT_EQ(r.events[3].address, r.events[1].address);
  EXPECT_EQ(r.events[3].bytes, 12);
  EXPECT_EQ(r.events[0].address % 512, 0u);
  EXPECT_EQ(MetaAccount().ledger().live_bytes(), live_before);
}

TEST(AllocationTraceFeed, ARefusalIsTracedWithWhatTheCapStillAllowed) {
  ScopedTrace trace(CpuAccount());
  ScopedLimits limits(CpuAccount(), LimitsForCap(CpuAccount().ledger().live_bytes() + 100));
  EXPECT_THROW(at::empty({1024}, at::kFloat), c10::OutOfMemoryError);
  const TraceRecord r = trace.Record();
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].action, TraceAction::kOom);
  EXPECT_EQ(r.events[0].bytes, 4096);
  EXPECT_EQ(r.events[0].free_bytes, 100);
}

TEST(AllocationTraceFeed, NothingIsRecordedWhileOff) {
  AllocationTrace& trace = CpuAccount().trace();
  trace.Enable();
  trace.Disable();
  { at::Tensor t = at::empty({64}, at::kFloat); }
  EXPECT_TRUE(trace.Record().events.empty());
}

}  // namespace
}  // namespace oomguard
