#include "allocators/meta_tracking_allocator.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <memory>

#include "allocators/install.h"

namespace oomguard {
namespace {
constexpr int kOriginShift = 56;
static_assert(Ledger::kMaxOrigins < 255, "an origin + 1 must fit in the context's top byte");

struct TracedMetaBlock {  // Note [Traced meta blocks]
  int64_t nbytes = 0;
  int origin = Ledger::kNoOrigin;
  uint64_t address = 0;
};

thread_local bool t_uncounted = false;

}  // namespace

UncountedMetaScope::UncountedMetaScope() : previous_(t_uncounted) { t_uncounted = true; }
UncountedMetaScope::~UncountedMetaScope() { t_uncounted = previous_; }

MetaTrackingAllocator::MetaTrackingAllocator(DeviceAccount& account) : account_(account) {}

c10::DataPtr MetaTrackingAllocator::allocate(size_t nbytes) {
  const c10::Device meta(c10::DeviceType::Meta);
  if (nbytes == 0 || t_uncounted) return {nullptr, nullptr, &Delete, meta};  // a null context: no deleter runs
  TORCH_CHECK(nbytes < (uintptr_t{1} << kOriginShift), "oomguard: a meta allocation of ", nbytes,
              " bytes is past what the meta allocator records (2^56 bytes)");
  if (account_.wants_addresses()) {
    const auto bytes = static_cast<int64_t>(nbytes);
    auto traced = std::make_unique<TracedMetaBlock>();  // before the charge: nothing to undo if it throws
    traced->nbytes = bytes;
    traced->origin = account_.Charge(bytes);
    traced->address = account_.trace().NextSyntheticAddress(bytes);
    account_.TraceAlloc(traced->address, bytes);
    return {nullptr, traced.release(), &DeleteTraced, meta};
  }
  const int origin = account_.Charge(static_cast<int64_t>(nbytes));
  // Note [Meta context]: the context is not an address but the byte count, with the origin (its phase
  // and epoch, ledger.h, Note [Live bytes by origin]) + 1 in the top byte.
  const uintptr_t context = (static_cast<uintptr_t>(origin + 1) << kOriginShift) | static_cast<uintptr_t>(nbytes);
  return {nullptr, reinterpret_cast<void*>(context), &Delete, meta};
}

void MetaTrackingAllocator::Delete(void* context) {
  const auto value = reinterpret_cast<uintptr_t>(context);
  const auto nbytes = static_cast<int64_t>(value & ((uintptr_t{1} << kOriginShift) - 1));
  const int origin = static_cast<int>(value >> kOriginShift) - 1;
  // The meta allocator is a process-wide singleton, so its account is too (install.h).
  MetaAccount().Refund(nbytes, origin);
}

void MetaTrackingAllocator::DeleteTraced(void* context) {
  const auto* traced = static_cast<const TracedMetaBlock*>(context);
  MetaAccount().TraceFree(traced->address, traced->nbytes);
  MetaAccount().Refund(traced->nbytes, traced->origin);
  delete traced;
}

}  // namespace oomguard
