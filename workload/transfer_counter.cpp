#include "workload/transfer_counter.h"

#include <ATen/record_function.h>

#include <atomic>

#include "allocators/cpu_tracking_allocator.h"
#include "base/check.h"

namespace oomguard {
namespace {

std::atomic<int64_t> g_count{0};
std::atomic<int64_t> g_bytes{0};
std::atomic<bool> g_active{false};
std::atomic<int64_t> g_backward_count{0};
std::atomic<int64_t> g_backward_bytes{0};
std::atomic<const Ledger*> g_ledger{nullptr};

std::unique_ptr<at::ObserverContext> OnCopy(const at::RecordFunction& fn) {
  const auto inputs = fn.inputs();
  if (inputs.size() < 2 || !inputs[0].isTensor() || !inputs[1].isTensor()) return nullptr;
  const at::Tensor& dst = inputs[0].toTensor();
  const at::Tensor& src = inputs[1].toTensor();
  if (!src.is_cpu() || !src.has_storage()) return nullptr;
  // A wrapped number is a kernel argument, and a host-to-host copy moves nothing to the device
  // (Note [Host scalars], host_scalars.h).
  if (src.unsafeGetTensorImpl()->is_wrapped_number()) return nullptr;
  if (dst.is_cpu() && dst.has_storage() && IsHostAllocation(dst.storage().data_ptr())) return nullptr;
  // Note [What counts as a transfer]
  if (IsHostAllocation(src.storage().data_ptr()) || dst.is_cuda()) {
    g_count.fetch_add(1, std::memory_order_relaxed);
    g_bytes.fetch_add(static_cast<int64_t>(src.nbytes()), std::memory_order_relaxed);
    const Ledger* ledger = g_ledger.load(std::memory_order_acquire);
    if (ledger != nullptr && ledger->PhaseName(ledger->phase_index()) == "backward") {
      g_backward_count.fetch_add(1, std::memory_order_relaxed);
      g_backward_bytes.fetch_add(static_cast<int64_t>(src.nbytes()), std::memory_order_relaxed);
    }
  }
  return nullptr;
}

std::unique_ptr<at::ObserverContext> OnFunction(const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (name != nullptr && std::strcmp(name, "aten::copy_") == 0) return OnCopy(fn);
  return nullptr;
}

}  // namespace

TransferCounter::TransferCounter(const Ledger* ledger) {
  OOMGUARD_CHECK(!g_active.exchange(true)) << "only one TransferCounter may exist at a time";
  g_count = 0;
  g_bytes = 0;
  g_backward_count = 0;
  g_backward_bytes = 0;
  g_ledger = ledger;
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(&OnFunction).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

TransferCounter::~TransferCounter() {
  at::removeCallback(handle_);
  g_ledger = nullptr;
  g_active = false;
}

int64_t TransferCounter::count() const { return g_count.load(std::memory_order_relaxed); }
int64_t TransferCounter::bytes() const { return g_bytes.load(std::memory_order_relaxed); }
int64_t TransferCounter::backward_count() const { return g_backward_count.load(std::memory_order_relaxed); }
int64_t TransferCounter::backward_bytes() const { return g_backward_bytes.load(std::memory_order_relaxed); }

}  // namespace oomguard
