// CudaModelFeed: drives a CachingAllocatorModel from a cpu or meta device's allocations, so a run
// without a GPU predicts the CUDA caching allocator's statistics and, by default under a cap, judges
// each request as the GPU would (`oomguard run --verdict reserved`).
//
//   oomguard::CudaModelFeed feed(limits.cap_bytes, config, oomguard::ModelRole::kDecides);
//   {
//     oomguard::ScopedModelFeed attach(oomguard::CpuAccount(), &feed);
//     ... tensors come and go: each allocation and free reaches the model; with kDecides a request
//     the model refuses is an OOM (c10::OutOfMemoryError), as on a GPU capped on reserved bytes ...
//   }
//   oomguard::CachingAllocatorModelStats s = feed.stats();  // predicted allocated/reserved peaks
//
// How a request reaches the model: DeviceAccount::Charge asks Admit (through the ledger's TryCharge,
// once the ledger's cap has admitted it), which allocates the model's block; the allocator then
// reports the tensor's address (DeviceAccount::TraceAlloc -> OnAlloc), which binds that block to it,
// on the same thread. A block Admit made whose tensor was never made is given back by Abandon. With
// no feed attached all this costs one atomic load (acquire) per allocation and per free.
//
// Note [Predicted OOMs]: with ModelRole::kPredicts a request the model's cap refuses counts in
// stats().num_ooms (a real GPU with that cap would have raised there) but the tensor lives on for the
// ledger; its later free is ignored. Once the model has refused a request, its later numbers describe
// a run the GPU would not have reached. With kDecides the refusal is the run's OOM.
//
// Thread safety: every method may be called from any thread (one mutex); the admitted block waits for
// its address in a thread-local slot, so Admit and OnAlloc/Abandon of one request share a thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "allocators/caching_allocator_model.h"
#include "allocators/ledger.h"

namespace oomguard {

class DeviceAccount;

// Whether the model's refusals fail requests (kDecides) or are only counted (kPredicts).
enum class ModelRole { kPredicts, kDecides };

class CudaModelFeed : public Ledger::Admission {
 public:
  explicit CudaModelFeed(int64_t cap_bytes = CachingAllocatorModel::kUnlimited, CachingAllocatorConfig config = {},
                         ModelRole role = ModelRole::kPredicts);
  CudaModelFeed(const CudaModelFeed&) = delete;
  CudaModelFeed& operator=(const CudaModelFeed&) = delete;

  // The model allocates a block for a request of nbytes, kept for this thread's next OnAlloc. Returns
  // false only when the model refused and the feed decides (kDecides).
  bool Admit(int64_t nbytes) override;
  // The request Admit admitted on this thread was not made after all: its block goes back.
  void Abandon();
  // A tensor of nbytes now lives at address (an address the allocator may reuse once freed): binds
  // the block Admit made on this thread, or, without one, allocates it now.
  void OnAlloc(uint64_t address, int64_t nbytes);
  // The tensor at address is freed; addresses the feed never saw (allocated before it was attached,
  // or refused by the model) are ignored.
  void OnFree(uint64_t address);
  // Allocates a block of nbytes that no tensor owns and nothing frees: a library workspace the card's
  // process holds from the start (Note [cuBLAS workspaces held from the start]). Call before the first
  // tensor; the model's statistics then count it, and at_start() says what was held.
  void HoldFromStart(int64_t nbytes);
  // Allocated and reserved bytes held from the start (HoldFromStart), as the cuda backend reports its
  // allocator's at the start of a measurement.
  struct AtStart {
    int64_t allocated_bytes = 0;
    int64_t reserved_bytes = 0;
  };
  AtStart at_start() const;
  CachingAllocatorModelStats stats() const;
  std::optional<ModelRefusal> last_refusal() const;
  ModelRole role() const { return role_; }
  // The settings the model was given (unmodelled_keys: what it ignores).
  const CachingAllocatorConfig& config() const { return model_.config(); }  // immutable after construction

 private:
  const ModelRole role_;
  mutable std::mutex mutex_;
  CachingAllocatorModel model_;                    // guarded by mutex_
  std::unordered_map<uint64_t, uint64_t> blocks_;  // guarded by mutex_: tensor address -> model block
  AtStart at_start_;                               // guarded by mutex_
};

// Attaches a feed to an account for a scope (the controlling thread's job); detaches on exit.
class ScopedModelFeed {
 public:
  ScopedModelFeed(DeviceAccount& account, CudaModelFeed* feed);
  ~ScopedModelFeed();
  ScopedModelFeed(const ScopedModelFeed&) = delete;
  ScopedModelFeed& operator=(const ScopedModelFeed&) = delete;

 private:
  DeviceAccount& account_;
};

}  // namespace oomguard
