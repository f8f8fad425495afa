#include "allocators/cpu_tracking_allocator.h"
#include "allocators/host_first_allocation.h"

#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>

#include "base/sanitizers.h"

namespace oomguard {
namespace {

constexpr size_t kHeaderBytes = 64;  // Note [Size header]

struct BlockHeader {
  int64_t nbytes;
  DeviceAccount* account;
  bool host;      // a host allocation, not in the ledger (Note [Host memory on the cpu backend])
  bool profiled;  // its allocation was reported to PyTorch's profiler, so its free is (Note [The profiler's memory events])
  int origin;     // the phase and epoch it was allocated in (Note [Live bytes by origin], ledger.h)
};
static_assert(sizeof(BlockHeader) <= kHeaderBytes);

// Note [The profiler's memory events]: torch.profiler(profile_memory=True) learns of cpu allocations
// from the allocator (c10's DefaultCPUAllocator reports each one, and its free, while a profiler
// records memory). This allocator replaces that one for the whole process once installed (the Python
// package: at import), so it reports as that one does: a user's profiler keeps its memory events and
// timeline, and the tests compare the two on the same run. Totals: the bytes reported and not yet freed.
std::atomic<int64_t> g_profiled_bytes{0};

void ReportToProfiler(void* data, int64_t signed_bytes) {
  const int64_t total = g_profiled_bytes.fetch_add(signed_bytes, std::memory_order_relaxed) + signed_bytes;
  c10::reportMemoryUsageToProfiler(data, signed_bytes, static_cast<size_t>(total), static_cast<size_t>(total),
                                   c10::Device(c10::DeviceType::CPU));
}

thread_local bool t_host_scope = false;
thread_local bool t_host_first = false;  // the next allocation is host memory (HostFirstAllocationScope)
thread_local bool t_tiny_host = false;   // Note [Python's wrapped numbers]
std::atomic<int> g_host_everywhere{0};   // ProcessHostAllocationScopes alive

// Note [Small blocks]: glibc's posix_memalign at c10's 64-byte alignment costs more the larger the
// block (about 550 instructions an allocate+free pair at 64 bytes, 850 at 128), so the size header
// alone would make every small tensor dearer than under c10's own allocator. Blocks whose data is at
// most kSmallBlockBytes are made in size classes of 64 bytes and, when freed, kept on a list of the
// freeing thread (at most kKeptPerClass per class) to be handed out again. The ledger is charged the
// requested size all the same; what is kept is bounded (32 KiB a thread) and freed at thread exit.
// Under AddressSanitizer nothing is kept, so that a use after free of a small tensor is still caught.
constexpr bool kKeepSmallBlocks = !kUnderAddressSanitizer;
constexpr size_t kSmallClassBytes = 64;
constexpr size_t kSmallClasses = 4;
constexpr size_t kSmallBlockBytes = kSmallClassBytes * kSmallClasses;
constexpr int kKeptPerClass = 32;

size_t SmallClassOf(size_t nbytes) { return (nbytes - 1) / kSmallClassBytes; }  // nbytes in [1, kSmallBlockBytes]
size_t SmallClassBlockBytes(size_t size_class) { return (size_class + 1) * kSmallClassBytes + kHeaderBytes; }

struct KeptSmallBlocks {
  std::array<std::array<void*, kKeptPerClass>, kSmallClasses> blocks{};
  std::array<int, kSmallClasses> count{};
  KeptSmallBlocks() = default;
  KeptSmallBlocks(const KeptSmallBlocks&) = delete;
  KeptSmallBlocks& operator=(const KeptSmallBlocks&) = delete;
  ~KeptSmallBlocks() {
    for (size_t c = 0; c < kSmallClasses; ++c) {
      for (int i = 0; i < count[c]; ++i) c10::free_cpu(blocks[c][i]);
    }
  }
};
thread_local KeptSmallBlocks t_kept;

// A block for `nbytes` of data and the header; throws c10::Error when the system has none.
void* NewBlock(size_t nbytes) {
  if (!kKeepSmallBlocks || nbytes > kSmallBlockBytes) return c10::alloc_cpu(nbytes + kHeaderBytes);
  const size_t size_class = SmallClassOf(nbytes);
  KeptSmallBlocks& kept = t_kept;
  if (kept.count[size_class] > 0) return kept.blocks[size_class][--kept.count[size_class]];
  return c10::alloc_cpu(SmallClassBlockBytes(size_class));
}

void FreeBlock(void* block, size_t nbytes) {
  if (kKeepSmallBlocks && nbytes <= kSmallBlockBytes) {
    const size_t size_class = SmallClassOf(nbytes);
    KeptSmallBlocks& kept = t_kept;
    if (kept.count[size_class] < kKeptPerClass) {
      kept.blocks[size_class][kept.count[size_class]++] = block;
      return;
    }
  }
  c10::free_cpu(block);
}

std::atomic<int64_t> g_live_host_blocks{0};
std::atomic<bool> g_has_host_listener{false};
std::mutex g_host_listener_mutex;
HostBlocksListener g_host_listener;  // guarded by g_host_listener_mutex

// With g_host_listener_mutex held. The count is read again under the lock, so listeners told of
// racing changes end on the true state.
void TellHostListenerLocked() {
  if (g_host_listener) g_host_listener(g_live_host_blocks.load(std::memory_order_acquire) > 0);
}

void TellHostListener() {
  std::lock_guard<std::mutex> lock(g_host_listener_mutex);
  TellHostListenerLocked();
}

void HostBlockAllocated() {
  if (g_live_host_blocks.fetch_add(1, std::memory_order_acq_rel) == 0 &&
      g_has_host_listener.load(std::memory_order_acquire)) {
    TellHostListener();
  }
}

void HostBlockFreed() {
  if (g_live_host_blocks.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
      g_has_host_listener.load(std::memory_order_acquire)) {
    TellHostListener();
  }
}

void DeleteBlock(void* data) {
  if (data == nullptr) return;
  void* block = static_cast<char*>(data) - kHeaderBytes;
  const BlockHeader* header = static_cast<const BlockHeader*>(block);
  if (header->profiled) ReportToProfiler(data, -header->nbytes);
  if (header->host) {
    header->account->RefundHost(header->nbytes);
    HostBlockFreed();
  } else {
    header->account->TraceFree(reinterpret_cast<uint64_t>(data), header->nbytes);
    header->account->Refund(header->nbytes, header->origin);
  }
  FreeBlock(block, static_cast<size_t>(header->nbytes));
}

}  // namespace

HostAllocationScope::HostAllocationScope() : previous_(t_host_scope) { t_host_scope = true; }
HostAllocationScope::~HostAllocationScope() { t_host_scope = previous_; }
ProcessHostAllocationScope::ProcessHostAllocationScope() { g_host_everywhere.fetch_add(1, std::memory_order_acq_rel); }
ProcessHostAllocationScope::~ProcessHostAllocationScope() { g_host_everywhere.fetch_sub(1, std::memory_order_acq_rel); }
void SetTinyAllocationsAreHost(bool on) { t_tiny_host = on; }
HostFirstAllocationScope::HostFirstAllocationScope() : previous_(t_host_first) { t_host_first = true; }
HostFirstAllocationScope::~HostFirstAllocationScope() { t_host_first = previous_; }

namespace {

// The header of the block whose data `data` points at, when it is this allocator's.
const BlockHeader* HeaderOf(const c10::DataPtr& data) {
  if (data.get() == nullptr || data.get_deleter() != &DeleteBlock || data.get_context() != data.get()) return nullptr;
  return reinterpret_cast<const BlockHeader*>(static_cast<const char*>(data.get()) - kHeaderBytes);
}

}  // namespace

bool IsHostAllocation(const c10::DataPtr& data) {
  const BlockHeader* header = HeaderOf(data);
  return header != nullptr && header->host;
}

std::optional<int64_t> AllocatedBytes(const c10::DataPtr& data) {
  const BlockHeader* header = HeaderOf(data);
  return header != nullptr ? std::optional<int64_t>(header->nbytes) : std::nullopt;
}

void SetHostBlocksListener(HostBlocksListener listener) {
  std::lock_guard<std::mutex> lock(g_host_listener_mutex);
  g_host_listener = std::move(listener);
  g_has_host_listener.store(static_cast<bool>(g_host_listener), std::memory_order_release);
  TellHostListenerLocked();
}

int64_t LiveHostBlocks() { return g_live_host_blocks.load(std::memory_order_acquire); }

CpuTrackingAllocator::CpuTrackingAllocator(DeviceAccount& account) : account_(account) {}

c10::DataPtr CpuTrackingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return {nullptr, nullptr, &DeleteBlock, c10::Device(c10::DeviceType::CPU)};
  const bool host =
      t_host_scope || std::exchange(t_host_first, false) || (t_tiny_host && nbytes <= kLargestWrappedNumberBytes) ||
      g_host_everywhere.load(std::memory_order_acquire) > 0;
  const auto size = static_cast<int64_t>(nbytes);
  int origin = Ledger::kNoOrigin;
  if (host) {
    account_.ChargeHost(size);  // Note [Host memory is part of the cap]
  } else {
    origin = account_.Charge(size);
  }
  void* block = nullptr;
  try {
    block = NewBlock(nbytes);
  } catch (const c10::Error&) {
    // The cap admitted it, but this host could not give it: out of memory, as on a card that is full.
    host ? account_.RefundHost(size) : account_.Uncharge(size, origin);
    account_.ThrowHostOutOfMemory(
        size, host, std::string(host ? "host-side input" : "tensor memory") + ", which the system allocator refused");
  }
  const bool profiled = c10::memoryProfilingEnabled();
  new (block) BlockHeader{size, &account_, host, profiled, origin};
  void* data = static_cast<char*>(block) + kHeaderBytes;
  if (profiled) ReportToProfiler(data, size);
  if (host) {
    HostBlockAllocated();
  } else {
    account_.TraceAlloc(reinterpret_cast<uint64_t>(data), size);
  }
  return {data, data, &DeleteBlock, c10::Device(c10::DeviceType::CPU)};
}

c10::DeleterFnPtr CpuTrackingAllocator::raw_deleter() const { return &DeleteBlock; }

void CpuTrackingAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

}  // namespace oomguard
