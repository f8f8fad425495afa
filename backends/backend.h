// A backend, in the spirit of ggml's backend table: a BackendDriver per Backend (model/backend.h) says
// whether it can run here, names its device and the account that books its bytes, and opens a
// BackendSession per variant, which prepares the device, follows the measurement and collects what
// only that backend knows. Everything that branches on a backend reaches it here or through its
// plain traits (TraitsOf), never by its name.
//
//   const oomguard::BackendDriver& driver = oomguard::GetBackend(oomguard::ResolveBackend("auto"));
//   std::string why;
//   if (!driver.Available(&why)) { ... UNSUPPORTED, because `why` ... }
//   std::unique_ptr<oomguard::BackendSession> session = driver.Open(limits);  // cuda: cap set, cache emptied
//   session->account().ledger().ResetStatistics();
//   session->BeginMeasurement();                 // cuda: phases followed from here
//   ... run on session->device(), measure with session->account().ledger() ...
//   session->Collect(&measurement);              // cuda: the allocator's peaks by phase
//
// Adding a backend: its tracking allocator and account (allocators/), one file backends/<name>_backend.cpp
// defining its driver, one line in backends/backend_registry.cpp, and its row in model/backend.h.
//
// Error policy: asking for a backend this build or machine cannot run (Open without Available) is a
// programmer bug and aborts; whether it can run is Available's answer, with the reason.
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <memory>
#include <string>

#include "allocators/device_account.h"
#include "model/backend.h"
#include "model/measurement.h"

namespace oomguard {

// One variant's hold on a backend. One at a time per process (the accounts are process-wide).
class BackendSession {
 public:
  virtual ~BackendSession() = default;
  BackendSession(const BackendSession&) = delete;
  BackendSession& operator=(const BackendSession&) = delete;

  Backend backend() const { return backend_; }
  const BackendTraits& traits() const { return TraitsOf(backend_); }
  const c10::Device& device() const { return device_; }
  DeviceAccount& account() const { return *account_; }

  // Call after the ledger's statistics were reset for the variant: cuda follows its phases from here.
  virtual void BeginMeasurement() {}
  // What only this backend knows, into m (cuda: m->cuda); call once, after the run.
  virtual void Collect(VariantMeasurement* m) {}

  // The allocator's own history for memory_viz snapshots, where it keeps one (cuda: PyTorch's, with its
  // C++ stacks). false: the caller records the account's AllocationTrace instead.
  virtual bool StartOwnHistory(size_t max_events) { return false; }
  virtual void StopOwnHistory() {}
  virtual std::string OwnHistoryPickle() const { return ""; }

 protected:
  BackendSession(Backend backend, c10::Device device, DeviceAccount& account)
      : backend_(backend), device_(device), account_(&account) {}

 private:
  Backend backend_;
  c10::Device device_;
  DeviceAccount* account_;
};

// One per backend, stateless, from GetBackend.
class BackendDriver {
 public:
  virtual ~BackendDriver() = default;

  virtual Backend backend() const = 0;
  const BackendTraits& traits() const { return TraitsOf(backend()); }
  std::string name() const { return std::string(Name(backend())); }

  // Whether this build and machine can run it; else false with the reason in *why.
  [[nodiscard]] virtual bool Available(std::string* why) const = 0;
  // Compiled into this build (`--version`); Available may still say no (no GPU visible).
  virtual bool compiled_in() const { return true; }
  // One line for `--version`: "ready", "1 GPU(s) visible", ...
  virtual std::string Status() const { return "ready"; }

  virtual c10::Device device() const = 0;
  // How many devices of its kind this machine has, for real ranks that take one each
  // (traits().device_per_rank, Note [Ranks need a GPU each], run/rank_children.h); cuda: the GPUs visible.
  virtual int DeviceCount() const { return 1; }
  // The account that books its bytes (the ledger a fit trial checks between trials).
  virtual DeviceAccount& account() const = 0;

  // Prepares the backend for one variant under `limits` (Available first).
  virtual std::unique_ptr<BackendSession> Open(const Limits& limits) const = 0;
};

// The registry (backends/backend_registry.cpp).
const BackendDriver& GetBackend(Backend backend);

// `--backend auto`: cuda when it is available, else cpu. Any other request names a backend (the CLI
// checked it against AllNames<Backend>()).
Backend ResolveBackend(const std::string& requested);

}  // namespace oomguard
