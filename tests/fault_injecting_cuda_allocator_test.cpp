// The fault-injecting CUDA allocator around a fake caching allocator (host memory and call counters),
// so it runs without a GPU: which requests the injector refuses, with what message and record, and that
// everything else reaches the allocator it wraps. Nothing here creates a stream or touches CUDA.
#include "allocators/cuda/fault_injecting_cuda_allocator.h"

#include <c10/core/Allocator.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>

namespace oomguard {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;
using c10::DeviceIndex;
using c10::MempoolId_t;

void FakeDelete(void* ptr);

// Trivial bodies except for what the tests count or read back.
class FakeCudaAllocator final : public cca::CUDAAllocator {
 public:
  FakeCudaAllocator() { instance = this; }
  ~FakeCudaAllocator() override { instance = nullptr; }
  static FakeCudaAllocator* instance;  // for FakeDelete: a DataPtr's deleter is a plain function

  struct Calls {
    int allocate = 0, raw_alloc = 0, raw_alloc_with_stream = 0, raw_delete = 0;
    int get_device_stats = 0, reset_peak_stats = 0, empty_cache = 0, record_history = 0, trace_trackers = 0;
  } calls;
  bool is_initialized = false;
  double fraction = 1.0;
  size_t history_entries = 0;
  std::string user_metadata;

  c10::DataPtr allocate(size_t nbytes) override {
    ++calls.allocate;
    void* data = nbytes > 0 ? std::malloc(nbytes) : nullptr;
    return {data, data, &FakeDelete, c10::Device(c10::kCUDA, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &FakeDelete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  void* raw_alloc(size_t nbytes) override {
    ++calls.raw_alloc;
    return nbytes > 0 ? std::malloc(nbytes) : nullptr;
  }
  void* raw_alloc_with_stream(size_t nbytes, cudaStream_t) override {
    ++calls.raw_alloc_with_stream;
    return nbytes > 0 ? std::malloc(nbytes) : nullptr;
  }
  void raw_delete(void* ptr) override {
    ++calls.raw_delete;
    std::free(ptr);
  }

  bool initialized() override { return is_initialized; }
  void emptyCache(MempoolId_t) override { ++calls.empty_cache; }
  cca::DeviceStats getDeviceStats(DeviceIndex) override {
    ++calls.get_device_stats;
    cca::DeviceStats stats;
    stats.num_ooms = 7;
    stats.reserved_bytes[0].peak = 4096;
    return stats;
  }
  void resetAccumulatedStats(DeviceIndex) override {}
  void resetPeakStats(DeviceIndex) override { ++calls.reset_peak_stats; }
  void init(int) override {}
  double getMemoryFraction(DeviceIndex) override { return fraction; }
  void setMemoryFraction(double value, DeviceIndex) override { fraction = value; }
  std::vector<cca::StreamSegmentSize> getExpandableSegmentSizes(DeviceIndex) override { return {}; }
  void enable(bool) override {}
  bool isEnabled() const override { return true; }
  void cacheInfo(DeviceIndex, size_t* largest_block) override { *largest_block = 123; }
  void* getBaseAllocation(void* ptr, size_t* size) override { return ptr; }
  using cca::CUDAAllocator::recordStream;
  void recordStream(const c10::DataPtr&, c10::cuda::CUDAStream) override {}
  cca::SnapshotInfo snapshot(MempoolId_t, bool) override { return {}; }
  void beginAllocateToPool(DeviceIndex, MempoolId_t, std::function<bool(cudaStream_t)>) override {}
  void endAllocateToPool(DeviceIndex, MempoolId_t) override {}
  void releasePool(DeviceIndex, MempoolId_t) override {}
  cca::ShareableHandle shareIpcHandle(void*) override { return {}; }
  std::shared_ptr<void> getIpcDevPtr(std::string) override { return nullptr; }
  void recordHistory(bool, cca::CreateContextFn, size_t max_entries, cca::RecordContext, bool,
                     const std::vector<std::string>&) override {
    ++calls.record_history;
    history_entries = max_entries;
  }
  void setUserMetadata(const std::string& metadata) override { user_metadata = metadata; }
  std::string getUserMetadata() override { return user_metadata; }
  void attachOutOfMemoryObserver(cca::OutOfMemoryObserver) override {}
  void attachAllocatorTraceTracker(cca::AllocatorTraceTracker) override { ++calls.trace_trackers; }
  void enablePeerAccess(DeviceIndex, DeviceIndex) override {}
  cudaError_t memcpyAsync(void*, int, const void*, int, size_t, cudaStream_t, bool) override { return cudaSuccess; }
  std::shared_ptr<cca::AllocatorState> getCheckpointState(DeviceIndex, MempoolId_t) override { return nullptr; }
  cca::CheckpointDelta setCheckpointPoolState(DeviceIndex, std::shared_ptr<cca::AllocatorState>) override { return {}; }
  std::string name() override { return "fake"; }
};

FakeCudaAllocator* FakeCudaAllocator::instance = nullptr;
void FakeDelete(void* ptr) { FakeCudaAllocator::instance->raw_delete(ptr); }

class FaultInjectingCudaAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override { account_.ledger().SetPhase("forward"); }

  void Inject(const std::string& spec) {
    std::string error;
    std::unique_ptr<FaultPolicy> policy = ParseFaultSpec(spec, &error);
    ASSERT_NE(policy, nullptr) << error;
    injector_ = std::make_shared<FaultInjector>(std::move(policy));
    Limits limits;
    limits.faults = injector_;
    limits_.reset();  // restore before replacing: guards nest
    limits_.emplace(account_, std::move(limits));
  }

  // The message of the OutOfMemoryError the allocation throws ("" when it does not throw).
  std::string RefusalOf(size_t nbytes) {
    try {
      c10::DataPtr data = wrapper_->allocate(nbytes);
    } catch (const c10::OutOfMemoryError& e) {
      return e.what_without_backtrace();
    }
    return "";
  }

  FakeCudaAllocator fake_;
  DeviceAccount account_{"cuda"};
  std::unique_ptr<cca::CUDAAllocator> wrapper_ = MakeFaultInjectingCudaAllocator(&fake_, account_);
  std::shared_ptr<FaultInjector> injector_;
  std::optional<ScopedLimits> limits_;
};

TEST_F(FaultInjectingCudaAllocatorTest, NthAllocationRefusesTheThirdAndForwardsTheOthers) {
  Inject("nth=3");
  c10::DataPtr first = wrapper_->allocate(1024);
  c10::DataPtr second = wrapper_->allocate(1024);
  EXPECT_EQ(fake_.calls.allocate, 2);
  EXPECT_EQ(RefusalOf(1024),
            "CUDA out of memory (injected by oomguard: nth=3, allocation #3 in phase forward). Tried to allocate "
            "1024 bytes. No cap is set; 0 bytes is live in tensors.");
  EXPECT_EQ(fake_.calls.allocate, 2);  // the refused request never reached the caching allocator
  c10::DataPtr fourth = wrapper_->allocate(1024);
  EXPECT_NE(fourth.get(), nullptr);
  EXPECT_EQ(fake_.calls.allocate, 3);

  const DeviceAccount::Refusal refusal = account_.last_refusal();
  EXPECT_EQ(refusal.requested_bytes, 1024);
  EXPECT_TRUE(refusal.injected);
  EXPECT_EQ(refusal.phase, "forward");
  ASSERT_EQ(injector_->failures().size(), 1u);
}

TEST_F(FaultInjectingCudaAllocatorTest, FreeingTheDataPtrReachesTheInnerRawDelete) {
  EXPECT_EQ(wrapper_->raw_deleter(), &FakeDelete);
  {
    c10::DataPtr data = wrapper_->allocate(64);
    EXPECT_EQ(data.get_deleter(), &FakeDelete);  // the inner DataPtr, unchanged
    EXPECT_EQ(data.device(), c10::Device(c10::kCUDA, 0));
  }
  EXPECT_EQ(fake_.calls.raw_delete, 1);
  void* raw = wrapper_->raw_alloc(32);
  wrapper_->raw_delete(raw);
  EXPECT_EQ(fake_.calls.raw_alloc, 1);
  EXPECT_EQ(fake_.calls.raw_delete, 2);
}

TEST_F(FaultInjectingCudaAllocatorTest, ZeroByteRequestsAreNeverCounted) {
  Inject("nth=1");
  c10::DataPtr empty = wrapper_->allocate(0);
  EXPECT_EQ(wrapper_->raw_alloc(0), nullptr);
  EXPECT_EQ(wrapper_->raw_alloc_with_stream(0, nullptr), nullptr);
  EXPECT_EQ(fake_.calls.allocate + fake_.calls.raw_alloc + fake_.calls.raw_alloc_with_stream, 3);
  EXPECT_EQ(injector_->requests_seen(), 0);
  EXPECT_NE(RefusalOf(8), "");  // the first real request is the 1st
}

TEST_F(FaultInjectingCudaAllocatorTest, RawAllocationsAskTheInjectorToo) {
  Inject("nth=2");
  void* raw = wrapper_->raw_alloc(16);
  EXPECT_THROW(wrapper_->raw_alloc_with_stream(16, nullptr), c10::OutOfMemoryError);
  EXPECT_EQ(fake_.calls.raw_alloc_with_stream, 0);
  void* third = wrapper_->raw_alloc(16);  // nth=2 fires once
  EXPECT_EQ(fake_.calls.raw_alloc, 2);
  EXPECT_EQ(injector_->requests_seen(), 3);
  wrapper_->raw_delete(raw);
  wrapper_->raw_delete(third);
}

TEST_F(FaultInjectingCudaAllocatorTest, PhaseAndMinimumSizeFireOnTheRightRequest) {
  Inject("phase=backward,nth=2");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(RefusalOf(256), "") << "forward request " << i;
  account_.ledger().SetPhase("backward");
  EXPECT_EQ(RefusalOf(256), "");
  EXPECT_EQ(RefusalOf(512),
            "CUDA out of memory (injected by oomguard: phase=backward,nth=2, allocation #5 in phase backward). Tried "
            "to allocate 512 bytes. No cap is set; 0 bytes is live in tensors.");
  EXPECT_EQ(account_.last_refusal().phase, "backward");
  EXPECT_EQ(fake_.calls.allocate, 4);

  Inject("min-size=1MiB");
  EXPECT_EQ(RefusalOf((1 << 20) - 1), "");
  EXPECT_NE(RefusalOf(1 << 20), "");
  const DeviceAccount::Refusal refusal = account_.last_refusal();
  EXPECT_EQ(refusal.requested_bytes, 1 << 20);
  EXPECT_TRUE(refusal.injected);
  EXPECT_EQ(fake_.calls.allocate, 5);
}

TEST_F(FaultInjectingCudaAllocatorTest, EverythingElseReachesTheInnerAllocator) {
  const cca::DeviceStats stats = wrapper_->getDeviceStats(0);
  EXPECT_EQ(stats.num_ooms, 7);
  EXPECT_EQ(stats.reserved_bytes[0].peak, 4096);
  wrapper_->resetPeakStats(0);
  wrapper_->emptyCache({0, 0});
  wrapper_->setMemoryFraction(0.25, 0);
  EXPECT_EQ(wrapper_->getMemoryFraction(0), 0.25);
  wrapper_->recordHistory(true, nullptr, 99, cca::RecordContext::NEVER, false, {});
  wrapper_->attachAllocatorTraceTracker([](const cca::TraceEntry&) {});
  EXPECT_EQ(fake_.calls.get_device_stats, 1);
  EXPECT_EQ(fake_.calls.reset_peak_stats, 1);
  EXPECT_EQ(fake_.calls.empty_cache, 1);
  EXPECT_EQ(fake_.calls.record_history, 1);
  EXPECT_EQ(fake_.history_entries, 99u);
  EXPECT_EQ(fake_.calls.trace_trackers, 1);
  EXPECT_EQ(wrapper_->name(), "fake");
  EXPECT_FALSE(wrapper_->initialized());
  fake_.is_initialized = true;
  EXPECT_TRUE(wrapper_->initialized());
  size_t largest = 0;
  wrapper_->cacheInfo(0, &largest);
  EXPECT_EQ(largest, 123u);
  // Methods with default bodies in CUDAAllocator are forwarded too (the default would return "").
  wrapper_->setUserMetadata("step=3");
  EXPECT_EQ(wrapper_->getUserMetadata(), "step=3");
}

// Installing replaces the process's CUDA allocator, so the test runs only where CUDA is not initialised
// (ctest runs each test in its own process).
TEST(FaultInjectingCudaAllocatorInstall, RefusesAfterCudaInitialisedThenRoutesBothLookups) {
  cca::CUDAAllocator* native = cca::allocator.load();
  if (native->initialized()) GTEST_SKIP() << "CUDA is already initialised in this process";
  DeviceAccount account("cuda");
  {
    FakeCudaAllocator initialised;
    initialised.is_initialized = true;
    // A programmer bug: the check aborts (in a forked child here), naming what was wrong.
    EXPECT_DEATH(
        {
          cca::allocator.store(&initialised);
          InstallFaultInjectingCudaAllocator(account);
        },
        "Check failed: !native->initialized\\(\\): the fault-injecting CUDA allocator must be installed before CUDA "
        "initialises \\(before the first CUDA tensor or ApplyCudaCap\\)");
  }
  InstallFaultInjectingCudaAllocator(account);
  cca::CUDAAllocator* installed = cca::get();
  EXPECT_NE(installed, native);
  EXPECT_EQ(c10::GetAllocator(c10::kCUDA), installed);
  EXPECT_EQ(installed->name(), native->name());
  EXPECT_EQ(installed->raw_deleter(), native->raw_deleter());
  EXPECT_FALSE(installed->initialized());
  InstallFaultInjectingCudaAllocator(account);  // once per process: a second call does nothing
  EXPECT_EQ(cca::get(), installed);
  DeviceAccount other("cuda");
  EXPECT_DEATH(InstallFaultInjectingCudaAllocator(other), "already installed for another account");
}

}  // namespace
}  // namespace oomguard
