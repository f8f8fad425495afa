// DeviceAccount: one device's ledger plus the limits its tracking allocator enforces (a cap in bytes,
// the simulated card's name for messages, an optional fault injector).
//
//   oomguard::DeviceAccount& cpu = oomguard::CpuAccount();       // install.h
//   {
//     oomguard::ScopedLimits limits(cpu, oomguard::LimitsForCard(*oomguard::FindCard("t4", &err)));
//     ... tensors allocated here fail past the T4's usable bytes with c10::OutOfMemoryError ...
//   }  // previous limits restored
//
// Ownership: accounts live for the whole process (allocators registered with c10 are never
// destroyed, and they point at their account). Limits are swapped by ScopedLimits on the controlling
// thread; allocation threads read them lock-free. Guards nest and must be destroyed in reverse order.
//
// Error policy: Charge and CheckInjectedFault throw c10::OutOfMemoryError (what PyTorch code already
// catches) when the cap or an injected fault refuses a request; nothing else in this header throws.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "allocators/allocation_trace.h"
#include "allocators/cuda_model_feed.h"
#include "allocators/fault_injection.h"
#include "allocators/ledger.h"

namespace oomguard {

struct CardPreset;

struct Limits {
  int64_t cap_bytes = Ledger::kUnlimited;  // what tensors may hold at once on this device
  std::string card;                        // "T4" etc. for messages; empty for a plain --cap
  int64_t card_total_bytes = 0;            // the card's reported capacity, for messages (0: unknown)
  int64_t context_bytes = 0;               // the modelled CUDA context, for messages
  std::shared_ptr<FaultInjector> faults;   // null: no injected failures
  // Note [Host memory is part of the cap]: on a backend whose device memory is this host's (cpu), what
  // the host could give when the variant began; host-side allocations are refused with an OOM once
  // they and the live tensors would pass it. 0: not bounded.
  int64_t host_budget_bytes = 0;
  // The device's index: 0, or on cuda a real rank's own GPU (Note [Ranks need a GPU each],
  // run/rank_children.h).
  int device = 0;
};

// The cap of a card preset: its reported total minus the modelled CUDA context.
Limits LimitsForCard(const CardPreset& card);
Limits LimitsForCap(int64_t cap_bytes);

class DeviceAccount {
 public:
  explicit DeviceAccount(std::string device_name);
  DeviceAccount(const DeviceAccount&) = delete;
  DeviceAccount& operator=(const DeviceAccount&) = delete;

  // Admits and records an allocation of nbytes, or throws c10::OutOfMemoryError. Hot path. Returns
  // the allocation's origin (the phase and epoch it was made in), which Refund takes back.
  //
  // Note [One decision point]: a request succeeds iff the ledger's cap (live + nbytes <= cap) AND an
  // attached CudaModelFeed admit it; both are asked inside Ledger::TryCharge, the ledger first, so a
  // refusal by either books nothing and raises no peak. A feed that decides (ModelRole::kDecides, the
  // default verdict under a cap) refuses when the caching allocator would: reserved + a new segment
  // past the cap after its release-and-retry, and the OOM's message then says reserved and allocated.
  int Charge(int64_t nbytes);
  // Takes back a Charge whose block was never made (the system allocator failed): Refund, and the
  // model's block, if a feed made one, goes back too.
  void Uncharge(int64_t nbytes, int origin);
  // Asks the fault injector (if any) about a request of nbytes in the current phase and throws
  // c10::OutOfMemoryError, recorded as an injected refusal, when it fails the request. For allocators
  // that do their own capping (the cuda caching allocator): Charge calls it first.
  void CheckInjectedFault(int64_t nbytes);
  void Refund(int64_t nbytes, int origin) { ledger_.Release(nbytes, origin); }
  // A host-side allocation (HostAllocationScope, cpu_tracking_allocator.h): not booked in the ledger,
  // but refused with c10::OutOfMemoryError past Limits::host_budget_bytes. RefundHost takes it back.
  void ChargeHost(int64_t nbytes);
  void RefundHost(int64_t nbytes) { host_live_bytes_.fetch_sub(nbytes, std::memory_order_relaxed); }
  // The host could not give memory the cap admitted (the system allocator failed): an OOM, not an error.
  // `host_side_input`: what was refused is a host-side input (Note [Host-side inputs are real data]).
  [[noreturn]] void ThrowHostOutOfMemory(int64_t nbytes, bool host_side_input, const std::string& what);

  // The allocators report each block's address here, after Charge and before Refund; with the trace
  // off and no model feed this is two atomic loads (allocation_trace.h, cuda_model_feed.h).
  // A refusal is traced by Charge itself.
  void TraceAlloc(uint64_t address, int64_t nbytes) {
    if (trace_.enabled()) trace_.RecordAlloc(address, nbytes, ledger_.phase());
    if (CudaModelFeed* feed = model_feed_.load(std::memory_order_acquire)) feed->OnAlloc(address, nbytes);
  }
  void TraceFree(uint64_t address, int64_t nbytes) {
    if (trace_.enabled()) trace_.RecordFree(address, nbytes, ledger_.phase());
    if (CudaModelFeed* feed = model_feed_.load(std::memory_order_acquire)) feed->OnFree(address);
  }
  AllocationTrace& trace() { return trace_; }
  // Whether TraceAlloc wants blocks' addresses (the meta allocator gives its blocks synthetic ones
  // only then).
  bool wants_addresses() const { return trace_.enabled() || model_feed_.load(std::memory_order_relaxed) != nullptr; }
  // Attaches a CudaModelFeed (null: detaches). Prefer ScopedModelFeed (cuda_model_feed.h).
  void SetModelFeed(CudaModelFeed* feed) { model_feed_.store(feed, std::memory_order_release); }

  Ledger& ledger() { return ledger_; }
  const std::string& device_name() const { return device_name_; }
  Limits limits() const;
  // The most recent request Charge refused, as it stood then (stack unwinding frees tensors before
  // anyone can look), for OOM reports. requested_bytes is 0 when nothing was refused yet.
  struct Refusal {
    int64_t requested_bytes = 0;
    int64_t live_bytes = 0;
    std::string phase;
    bool injected = false;
  };
  Refusal last_refusal() const;
  // Records a refusal made elsewhere (the cuda caching allocator's OOM), as it stands now.
  void RecordRefusal(int64_t requested_bytes);

  // Replaces the limits and returns the previous ones. Prefer ScopedLimits.
  Limits ExchangeLimits(Limits next);

 private:
  [[noreturn]] void ThrowOutOfMemory(int64_t nbytes, const InjectedFailure* injected,
                                     const ModelRefusal* reserved = nullptr);

  const std::string device_name_;
  Ledger ledger_;
  AllocationTrace trace_;
  std::atomic<CudaModelFeed*> model_feed_{nullptr};  // not owned
  std::atomic<int64_t> cap_bytes_{Ledger::kUnlimited};
  std::atomic<FaultInjector*> faults_{nullptr};
  std::atomic<int64_t> host_budget_bytes_{0};
  std::atomic<int64_t> host_live_bytes_{0};
  mutable std::mutex refusal_mutex_;
  mutable Refusal last_refusal_;  // guarded by refusal_mutex_
  mutable std::mutex limits_mutex_;
  Limits limits_;  // guarded by limits_mutex_; owns what faults_ points to
};

// Installs limits on an account for a scope and restores the previous ones on exit.
class ScopedLimits {
 public:
  ScopedLimits(DeviceAccount& account, Limits limits);
  ~ScopedLimits();
  ScopedLimits(const ScopedLimits&) = delete;
  ScopedLimits& operator=(const ScopedLimits&) = delete;

 private:
  DeviceAccount& account_;
  Limits previous_;
};

// The message of an over-cap or injected failure, in the shape of PyTorch's CUDA OOM message.
// `reserved` (if given): the caching allocator's model refused it (Note [One decision point]), and
// the message says its reserved and allocated bytes and the segment it needed.
std::string OutOfMemoryMessage(std::string_view device_name, const Limits& limits, int64_t requested_bytes,
                               int64_t live_bytes, const InjectedFailure* injected,
                               const ModelRefusal* reserved = nullptr);

// A cuda OOM under the cap: the simulated card and cap first, then PyTorch's own message, which names
// the physical GPU and its capacity (the cap shows there as the "allowed" memory).
std::string SimulatedCudaOomMessage(const Limits& limits, int64_t requested_bytes, int64_t live_bytes,
                                    std::string_view pytorch_message);

}  // namespace oomguard
