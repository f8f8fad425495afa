// RunObserver's screen (Note [Screen, then watch], diagnose/run_observer.h): what it keeps between the
// marks and what it concludes at each. Internal to diagnose/: run_observer.cpp drives it.
#pragma once

#include <ATen/record_function.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "allocators/ledger.h"
#include "diagnose/run_observer.h"
#include "ops/op_stream.h"

namespace oomguard {

// Marks and Suspicion() are the controlling thread's; backward nodes may run on the autograd engine's
// threads. One at a time per process, like the observer that owns it.
struct RunObserver::Screen final : OpObserver {
  explicit Screen(Ledger& ledger);
  ~Screen() override;
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  // The marks. `phase`: the ledger's current phase. At the end of `iteration` (N): `previous_epoch`, the
  // epoch N-1 booked its allocations under; `state_phases`, the phases whose bytes may outlive an
  // iteration (both read from N = 2 on).
  void AtBeginIteration();
  void AtBackwardDone();
  void AtEvalDone(int phase);
  void AtEndIteration(int64_t iteration, int previous_epoch, const std::vector<bool>& state_phases);

  // Why a watch could find something, the first seen; empty if nothing so far.
  std::string Suspicion() const;

  // A non-leaf's retain_grad() is a hook on the node that made it, which the engine runs first.
  void OnBackwardNode(const at::RecordFunction&) override;
  // Operators are watched (their names only) while a checkpoint recomputes without its RNG state: the
  // screen asks whether that recomputation draws.
  std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) override;

 private:
  static void WatchTheRecomputation(bool begins);
  // Autograd nodes made on this thread since the previous mark; starts a new count.
  bool NodesMadeSinceMark();
  void Suspect(const char* why);

  Ledger& ledger_;
  std::atomic<bool> retain_grad_hook_{false};
  std::atomic<bool> random_draw_{false};
  uint64_t sequence_at_mark_;
  std::string suspicion_;
  // Last: gone before what their callbacks read.
  OpSubscription backward_nodes_;
  OpSubscription draws_;
};

}  // namespace oomguard
