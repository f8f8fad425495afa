#include "allocators/device_account.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>

#include "allocators/cards.h"
#include "base/byte_size.h"

namespace oomguard {

Limits LimitsForCard(const CardPreset& card) {
  Limits limits;
  limits.cap_bytes = card.allocator_cap_bytes();
  limits.card = std::string(card.display_name);
  limits.card_total_bytes = card.total_bytes;
  limits.context_bytes = card.context_bytes;
  return limits;
}

Limits LimitsForCap(int64_t cap_bytes) {
  Limits limits;
  limits.cap_bytes = cap_bytes;
  return limits;
}

DeviceAccount::DeviceAccount(std::string device_name) : device_name_(std::move(device_name)) {}

namespace {

// The feed as the ledger's second judge, remembering whether it was the one that refused.
struct ModelAdmission final : Ledger::Admission {
  explicit ModelAdmission(CudaModelFeed* feed) : feed(feed) {}
  bool Admit(int64_t nbytes) override {
    refused = !feed->Admit(nbytes);
    return !refused;
  }
  CudaModelFeed* feed;
  bool refused = false;
};

}  // namespace

int DeviceAccount::Charge(int64_t nbytes) {
  CheckInjectedFault(nbytes);
  int origin = Ledger::kNoOrigin;
  const int64_t cap = cap_bytes_.load(std::memory_order_relaxed);
  CudaModelFeed* feed = model_feed_.load(std::memory_order_acquire);
  if (feed == nullptr) {
    if (!ledger_.TryCharge(nbytes, cap, &origin)) ThrowOutOfMemory(nbytes, nullptr);
    return origin;
  }
  ModelAdmission model(feed);
  if (!ledger_.TryCharge(nbytes, cap, &origin, &model)) {
    const std::optional<ModelRefusal> refusal = model.refused ? feed->last_refusal() : std::nullopt;
    ThrowOutOfMemory(nbytes, nullptr, refusal ? &*refusal : nullptr);
  }
  return origin;
}

void DeviceAccount::Uncharge(int64_t nbytes, int origin) {
  if (CudaModelFeed* feed = model_feed_.load(std::memory_order_acquire)) feed->Abandon();
  Refund(nbytes, origin);
}

void DeviceAccount::CheckInjectedFault(int64_t nbytes) {
  if (FaultInjector* faults = faults_.load(std::memory_order_acquire)) {
    if (auto injected = faults->Check(nbytes, ledger_.phase())) {
      ledger_.CountRefusal();
      ThrowOutOfMemory(nbytes, &*injected);
    }
  }
}

DeviceAccount::Refusal DeviceAccount::last_refusal() const {
  std::lock_guard<std::mutex> lock(refusal_mutex_);
  return last_refusal_;
}

Limits DeviceAccount::limits() const {
  std::lock_guard<std::mutex> lock(limits_mutex_);
  return limits_;
}

Limits DeviceAccount::ExchangeLimits(Limits next) {
  std::lock_guard<std::mutex> lock(limits_mutex_);
  std::swap(limits_, next);
  cap_bytes_.store(limits_.cap_bytes, std::memory_order_relaxed);
  faults_.store(limits_.faults.get(), std::memory_order_release);
  host_budget_bytes_.store(limits_.host_budget_bytes, std::memory_order_relaxed);
  return next;
}

void DeviceAccount::ChargeHost(int64_t nbytes) {
  const int64_t budget = host_budget_bytes_.load(std::memory_order_relaxed);
  const int64_t host = host_live_bytes_.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  if (budget <= 0 || host + ledger_.live_bytes() <= budget) return;
  host_live_bytes_.fetch_sub(nbytes, std::memory_order_relaxed);
  ThrowHostOutOfMemory(nbytes, /*host_side_input=*/true, "host-side input (data.on_host) with " + FormatBytes(host - nbytes) +
                                   " of it already on the host and " + FormatBytes(ledger_.live_bytes()) +
                                   " in tensors, and this host had " + FormatBytes(budget) +
                                   " available when the variant began");
}

// Note [Host-side inputs are real data]
// A host-side input (data.on_host, the token ids an embedding reads) is made in this host's memory by
// the cpu allocator on every backend, meta included: meta has shapes only on the device, not on the
// host. So a host-side input the host cannot hold is too large for this host whatever --backend says,
// and its message names what to shrink; only tensor memory on cpu is advised to move to meta.
void DeviceAccount::ThrowHostOutOfMemory(int64_t nbytes, bool host_side_input, const std::string& what) {
  ledger_.CountRefusal();
  {
    std::lock_guard<std::mutex> lock(refusal_mutex_);
    last_refusal_ = {nbytes, ledger_.live_bytes(), ledger_.phase(), false};
  }
  const std::string advice =
      host_side_input ? "A host-side input is real data in this host's memory on every backend, meta included: this "
                        "one is too large for this host; make it smaller (data.batch, data.shape)."
                      : "The " + device_name_ +
                            " backend keeps tensors in this host's memory: use --backend meta (shapes only, any "
                            "size), a smaller batch, or a smaller card.";
  C10_THROW_ERROR(OutOfMemoryError,
                  "Host out of memory: tried to allocate " + FormatBytes(nbytes) + " of " + what + ". " + advice);
}

void DeviceAccount::RecordRefusal(int64_t requested_bytes) {
  std::lock_guard<std::mutex> lock(refusal_mutex_);
  last_refusal_ = {requested_bytes, ledger_.live_bytes(), ledger_.phase(), false};
}

void DeviceAccount::ThrowOutOfMemory(int64_t nbytes, const InjectedFailure* injected, const ModelRefusal* reserved) {
  if (trace_.enabled()) {
    const int64_t cap = cap_bytes_.load(std::memory_order_relaxed);
    const int64_t held = reserved != nullptr ? reserved->reserved_bytes : ledger_.live_bytes();
    const int64_t free_bytes = cap == Ledger::kUnlimited ? 0 : std::max<int64_t>(cap - held, 0);
    trace_.RecordOom(nbytes, free_bytes, ledger_.phase());
  }
  {
    std::lock_guard<std::mutex> lock(refusal_mutex_);
    last_refusal_ = {nbytes, ledger_.live_bytes(), ledger_.phase(), injected != nullptr};
  }
  const std::string message =
      OutOfMemoryMessage(device_name_, limits(), nbytes, ledger_.live_bytes(), injected, reserved);
  C10_THROW_ERROR(OutOfMemoryError, message);
}

ScopedLimits::ScopedLimits(DeviceAccount& account, Limits limits)
    : account_(account), previous_(account.ExchangeLimits(std::move(limits))) {}

ScopedLimits::~ScopedLimits() { account_.ExchangeLimits(std::move(previous_)); }

std::string OutOfMemoryMessage(std::string_view device_name, const Limits& limits, int64_t requested_bytes,
                               int64_t live_bytes, const InjectedFailure* injected, const ModelRefusal* reserved) {
  std::string device(device_name);
  for (char& c : device) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string m = device + " out of memory";
  if (reserved != nullptr) {
    m += " (oomguard cap on reserved bytes, as on the GPU). Tried to allocate " + FormatBytes(requested_bytes) + ". ";
    if (!limits.card.empty()) {
      m += "Simulated " + limits.card + " has a total capacity of " + FormatBytes(limits.card_total_bytes) +
           ", of which " + FormatBytes(limits.context_bytes) + " is the modelled CUDA context. ";
    }
    return m + "PyTorch's caching allocator: reserved " + FormatBytes(reserved->reserved_bytes) + " (allocated " +
           FormatBytes(reserved->allocated_bytes) + ") + a " + FormatBytes(reserved->segment_bytes) +
           " segment would pass the cap " + FormatBytes(limits.cap_bytes) + " (" + std::to_string(limits.cap_bytes) +
           " bytes), even after releasing its cache. " + FormatBytes(live_bytes) + " is live in tensors.";
  }
  if (injected) {
    m += " (injected by oomguard: " + injected->policy + ", allocation #" + std::to_string(injected->allocation_index) +
         " in phase " + injected->phase + ")";
  } else {
    m += " (oomguard cap)";
  }
  m += ". Tried to allocate " + FormatBytes(requested_bytes) + ". ";
  if (limits.cap_bytes == Ledger::kUnlimited)
    return m + "No cap is set; " + FormatBytes(live_bytes) + " is live in tensors.";
  std::string cap_clause = "the cap is " + FormatBytes(limits.cap_bytes) + " (" + std::to_string(limits.cap_bytes) +
                           " bytes), of which " + FormatBytes(std::max<int64_t>(limits.cap_bytes - live_bytes, 0)) +
                           " is free. ";
  if (limits.card.empty()) {
    cap_clause[0] = 'T';
    m += cap_clause;
  } else {
    m += "Simulated " + limits.card + " has a total capacity of " + FormatBytes(limits.card_total_bytes) +
         ", of which " + FormatBytes(limits.context_bytes) + " is the modelled CUDA context; " + cap_clause;
  }
  m += "Of the capped memory " + FormatBytes(live_bytes) + " is live in tensors.";
  return m;
}

std::string SimulatedCudaOomMessage(const Limits& limits, int64_t requested_bytes, int64_t live_bytes,
                                    std::string_view pytorch_message) {
  std::string where =
      limits.card.empty() ? "a GPU capped at " + FormatBytes(limits.cap_bytes) : "the simulated " + limits.card;
  std::string m = "CUDA out of memory on " + where + " (oomguard cap): tried to allocate " +
                  FormatBytes(requested_bytes) + " with " + FormatBytes(live_bytes) + " live in tensors. ";
  if (!limits.card.empty()) {
    m += "The cap is " + FormatBytes(limits.cap_bytes) + " (" + std::to_string(limits.cap_bytes) + " bytes): the " +
         limits.card + "'s " + FormatBytes(limits.card_total_bytes) + " minus " + FormatBytes(limits.context_bytes) +
         " of modelled CUDA context. ";
  }
  // Note [The cuda cap is on reserved bytes]: the memory fraction limits the segments the caching
  // allocator holds, so its cache and its rounding count against the cap too, and an OOM can come with
  // fewer live tensor bytes than the cap.
  m += "PyTorch's caching allocator applies it to its reserved memory (tensors, rounding and cache). "
       "PyTorch's message, which names the physical GPU: ";
  m += pytorch_message;
  return m;
}

}  // namespace oomguard
