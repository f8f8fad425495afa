#include "workload/transfer_counter.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstring>
#include <optional>

#include "allocators/cpu_tracking_allocator.h"
#include "base/check.h"
#include "ops/op_stream.h"

namespace oomguard {
namespace {

std::atomic<int64_t> g_count{0};
std::atomic<int64_t> g_bytes{0};
std::atomic<bool> g_active{false};
std::atomic<int64_t> g_backward_count{0};
std::atomic<int64_t> g_backward_bytes{0};

void CountCopy(const at::RecordFunction& fn, const Ledger* ledger) {
  const auto inputs = fn.inputs();
  if (inputs.size() < 2 || !inputs[0].isTensor() || !inputs[1].isTensor()) return;
  const at::Tensor& dst = inputs[0].toTensor();
  const at::Tensor& src = inputs[1].toTensor();
  if (!src.is_cpu() || !src.has_storage()) return;
  // A wrapped number is a kernel argument, and a host-to-host copy moves nothing to the device
  // (Note [Host scalars], host_scalars.h).
  if (src.unsafeGetTensorImpl()->is_wrapped_number()) return;
  if (dst.is_cpu() && dst.has_storage() && IsHostAllocation(dst.storage().data_ptr())) return;
  // Note [What counts as a transfer]
  if (!IsHostAllocation(src.storage().data_ptr()) && !dst.is_cuda()) return;
  g_count.fetch_add(1, std::memory_order_relaxed);
  g_bytes.fetch_add(static_cast<int64_t>(src.nbytes()), std::memory_order_relaxed);
  if (ledger != nullptr && ledger->PhaseName(ledger->phase_index()) == "backward") {
    g_backward_count.fetch_add(1, std::memory_order_relaxed);
    g_backward_bytes.fetch_add(static_cast<int64_t>(src.nbytes()), std::memory_order_relaxed);
  }
}

}  // namespace

struct TransferCounter::Watch final : OpObserver {
  Watch(const Ledger* ledger, bool host_blocks_only)
      : ledger(ledger), subscription(this, {.op_starts = true, .inputs = true}, /*active=*/!host_blocks_only) {
    if (host_blocks_only) SetHostBlocksListener([this](bool any_alive) { subscription.SetActive(any_alive); });
  }
  ~Watch() override { SetHostBlocksListener({}); }

  std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) override {
    const char* name = fn.name();
    if (name != nullptr && std::strcmp(name, "aten::copy_") == 0) CountCopy(fn, ledger);
    return nullptr;
  }

  const Ledger* ledger;
  OpSubscription subscription;
};

TransferCounter::TransferCounter(const Ledger* ledger, c10::DeviceType device) {
  OOMGUARD_CHECK(!g_active.exchange(true)) << "only one TransferCounter may exist at a time";
  g_count = 0;
  g_bytes = 0;
  g_backward_count = 0;
  g_backward_bytes = 0;
  // Note [What counts as a transfer]: only cuda counts copies from memory that is not a host block.
  watch_ = std::make_unique<Watch>(ledger, /*host_blocks_only=*/device != c10::DeviceType::CUDA);
}

TransferCounter::~TransferCounter() {
  watch_.reset();
  g_active = false;
}

int64_t TransferCounter::count() const { return g_count.load(std::memory_order_relaxed); }
int64_t TransferCounter::bytes() const { return g_bytes.load(std::memory_order_relaxed); }
int64_t TransferCounter::backward_count() const { return g_backward_count.load(std::memory_order_relaxed); }
int64_t TransferCounter::backward_bytes() const { return g_backward_bytes.load(std::memory_order_relaxed); }

}  // namespace oomguard
