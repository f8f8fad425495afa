#include "allocators/cuda/fault_injecting_cuda_allocator.h"

#include <c10/core/Allocator.h>

#include <mutex>

#include "base/check.h"

namespace oomguard {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;
using c10::DeviceIndex;
using c10::MempoolId_t;

// The native allocator registers itself with c10::SetAllocator at priority 0 during static
// initialisation (BackendStaticInitializer in CUDACachingAllocator.cpp); only an equal or higher
// priority replaces it, and a higher one keeps a later priority-0 registration from undoing ours.
constexpr uint8_t kSetAllocatorPriority = 1;

// Every virtual of c10::Allocator, DeviceAllocator and CUDAAllocator is overridden, those with default
// bodies included, so nothing falls back to a base-class default the inner allocator replaced.
class FaultInjectingCudaAllocator final : public cca::CUDAAllocator {
 public:
  FaultInjectingCudaAllocator(cca::CUDAAllocator* inner, DeviceAccount& account) : inner_(inner), account_(account) {}

  // The three ways to allocate ask the injector first. The DataPtr is the inner one, unchanged, so its
  // deleter (the inner raw_deleter) frees it.
  c10::DataPtr allocate(size_t nbytes) override {
    CheckFault(nbytes);
    return inner_->allocate(nbytes);
  }
  void* raw_alloc(size_t nbytes) override {
    CheckFault(nbytes);
    return inner_->raw_alloc(nbytes);
  }
  void* raw_alloc_with_stream(size_t nbytes, cudaStream_t stream) override {
    CheckFault(nbytes);
    return inner_->raw_alloc_with_stream(nbytes, stream);
  }

  // c10::Allocator
  bool is_simple_data_ptr(const c10::DataPtr& data_ptr) const override { return inner_->is_simple_data_ptr(data_ptr); }
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { inner_->copy_data(dest, src, count); }

  // c10::DeviceAllocator
  bool initialized() override { return inner_->initialized(); }
  void emptyCache(MempoolId_t mempool_id) override { inner_->emptyCache(mempool_id); }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override { inner_->recordStream(ptr, stream); }
  cca::DeviceStats getDeviceStats(DeviceIndex device) override { return inner_->getDeviceStats(device); }
  void resetAccumulatedStats(DeviceIndex device) override { inner_->resetAccumulatedStats(device); }
  void resetPeakStats(DeviceIndex device) override { inner_->resetPeakStats(device); }
  std::pair<size_t, size_t> getMemoryInfo(DeviceIndex device) override { return inner_->getMemoryInfo(device); }

  // CUDAAllocator
  void raw_delete(void* ptr) override { inner_->raw_delete(ptr); }
  void init(int device_count) override { inner_->init(device_count); }
  double getMemoryFraction(DeviceIndex device) override { return inner_->getMemoryFraction(device); }
  void setMemoryFraction(double fraction, DeviceIndex device) override { inner_->setMemoryFraction(fraction, device); }
  std::vector<cca::StreamSegmentSize> getExpandableSegmentSizes(DeviceIndex device) override {
    return inner_->getExpandableSegmentSizes(device);
  }
  void enable(bool value) override { inner_->enable(value); }
  bool isEnabled() const override { return inner_->isEnabled(); }
  void cacheInfo(DeviceIndex device, size_t* largest_block) override { inner_->cacheInfo(device, largest_block); }
  void* getBaseAllocation(void* ptr, size_t* size) override { return inner_->getBaseAllocation(ptr, size); }
  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) override {
    inner_->recordStream(ptr, stream);
  }
  cca::SnapshotInfo snapshot(MempoolId_t mempool_id, bool include_traces) override {
    return inner_->snapshot(mempool_id, include_traces);
  }
  void beginAllocateToPool(DeviceIndex device, MempoolId_t mempool_id,
                           std::function<bool(cudaStream_t)> filter) override {
    inner_->beginAllocateToPool(device, mempool_id, std::move(filter));
  }
  void endAllocateToPool(DeviceIndex device, MempoolId_t mempool_id) override {
    inner_->endAllocateToPool(device, mempool_id);
  }
  void releasePool(DeviceIndex device, MempoolId_t mempool_id) override { inner_->releasePool(device, mempool_id); }
  int getPoolUseCount(DeviceIndex device, MempoolId_t mempool_id) override {
    return inner_->getPoolUseCount(device, mempool_id);
  }
  void createOrIncrefPool(DeviceIndex device, MempoolId_t mempool_id,
                          std::shared_ptr<cca::CUDAAllocator> allocator) override {
    inner_->createOrIncrefPool(device, mempool_id, std::move(allocator));
  }
  void setUseOnOOM(DeviceIndex device, MempoolId_t mempool_id, bool use_on_oom) override {
    inner_->setUseOnOOM(device, mempool_id, use_on_oom);
  }
  void setNoSplit(DeviceIndex device, MempoolId_t mempool_id) override { inner_->setNoSplit(device, mempool_id); }
  bool checkPoolLiveAllocations(DeviceIndex device, MempoolId_t mempool_id,
                                const std::unordered_set<void*>& expected_live_allocations) override {
    return inner_->checkPoolLiveAllocations(device, mempool_id, expected_live_allocations);
  }
  cca::ShareableHandle shareIpcHandle(void* ptr) override { return inner_->shareIpcHandle(ptr); }
  std::shared_ptr<void> getIpcDevPtr(std::string handle) override { return inner_->getIpcDevPtr(std::move(handle)); }
  bool isHistoryEnabled() override { return inner_->isHistoryEnabled(); }
  void recordHistory(bool enabled, cca::CreateContextFn context_recorder, size_t alloc_trace_max_entries,
                     cca::RecordContext when, bool clear_history,
                     const std::vector<std::string>& skip_actions) override {
    inner_->recordHistory(enabled, context_recorder, alloc_trace_max_entries, when, clear_history, skip_actions);
  }
  void recordAnnotation(const std::vector<std::pair<std::string, std::string>>& md) override {
    inner_->recordAnnotation(md);
  }
  void pushCompileContext(std::string& md) override { inner_->pushCompileContext(md); }
  void popCompileContext() override { inner_->popCompileContext(); }
  void setUserMetadata(const std::string& metadata) override { inner_->setUserMetadata(metadata); }
  std::string getUserMetadata() override { return inner_->getUserMetadata(); }
  void attachOutOfMemoryObserver(cca::OutOfMemoryObserver observer) override {
    inner_->attachOutOfMemoryObserver(std::move(observer));
  }
  void attachAllocatorTraceTracker(cca::AllocatorTraceTracker tracker) override {
    inner_->attachAllocatorTraceTracker(std::move(tracker));
  }
  void enablePeerAccess(DeviceIndex dev, DeviceIndex dev_to_access) override {
    inner_->enablePeerAccess(dev, dev_to_access);
  }
  cudaError_t memcpyAsync(void* dst, int dst_device, const void* src, int src_device, size_t count, cudaStream_t stream,
                          bool p2p_enabled) override {
    return inner_->memcpyAsync(dst, dst_device, src, src_device, count, stream, p2p_enabled);
  }
  std::shared_ptr<cca::AllocatorState> getCheckpointState(DeviceIndex device, MempoolId_t id) override {
    return inner_->getCheckpointState(device, id);
  }
  cca::CheckpointDelta setCheckpointPoolState(DeviceIndex device, std::shared_ptr<cca::AllocatorState> pps) override {
    return inner_->setCheckpointPoolState(device, std::move(pps));
  }
  // The inner one's name ("native"): code that asks which backend runs (torch.cuda's
  // get_allocator_backend) should keep seeing the caching allocator.
  std::string name() override { return inner_->name(); }

 private:
  // Zero-byte requests are not counted: the caching allocator serves them without touching the
  // device, and the cpu and meta allocators do not count them either.
  void CheckFault(size_t nbytes) {
    if (nbytes > 0) account_.CheckInjectedFault(static_cast<int64_t>(nbytes));
  }

  cca::CUDAAllocator* const inner_;
  DeviceAccount& account_;
};

}  // namespace

std::unique_ptr<cca::CUDAAllocator> MakeFaultInjectingCudaAllocator(cca::CUDAAllocator* inner, DeviceAccount& account) {
  OOMGUARD_CHECK(inner != nullptr) << "the fault-injecting CUDA allocator needs an allocator to wrap";
  return std::make_unique<FaultInjectingCudaAllocator>(inner, account);
}

void InstallFaultInjectingCudaAllocator(DeviceAccount& account) {
  static std::mutex mutex;
  static DeviceAccount* installed_for = nullptr;  // guarded by mutex
  std::lock_guard<std::mutex> lock(mutex);
  if (installed_for != nullptr) {
    OOMGUARD_CHECK(installed_for == &account)
        << "the fault-injecting CUDA allocator is already installed for another account";
    return;
  }
  cca::CUDAAllocator* native = cca::allocator.load();
  OOMGUARD_CHECK(!native->initialized()) << "the fault-injecting CUDA allocator must be installed before CUDA "
                                            "initialises (before the first CUDA tensor or ApplyCudaCap)";
  // Never freed: c10 keeps the raw pointer for the rest of the process (SetAllocator's contract).
  cca::CUDAAllocator* wrapper = MakeFaultInjectingCudaAllocator(native, account).release();
  c10::SetAllocator(c10::kCUDA, wrapper, kSetAllocatorPriority);
  OOMGUARD_CHECK(c10::GetAllocator(c10::kCUDA) == wrapper)
      << "another CUDA allocator is registered with a higher priority; fault injection cannot "
         "take its place";
  cca::allocator.store(wrapper);
  installed_for = &account;
}

}  // namespace oomguard
