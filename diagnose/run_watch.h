// RunObserver's watch (Mode::kWatch, diagnose/run_observer.h): the operator callback that records every
// operator's outputs in the observer's State (diagnose/run_observer_state.h), its in-place operators and
// the random draws a checkpoint recomputes without its RNG state. Internal to diagnose/: run_observer.cpp
// drives it.
#pragma once

#include <ATen/record_function.h>

#include <memory>

#include "diagnose/run_observer.h"
#include "ops/op_stream.h"

namespace oomguard {

struct RunObserver::Watch final : OpObserver {
  Watch() : subscription(this, {.op_starts = true, .op_ends = true, .outputs = true}) {}
  std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) override;
  void OnOpEnd(const at::RecordFunction& fn, at::ObserverContext* context) override;
  OpSubscription subscription;

  // The one State the callbacks write to (they are static: RecordFunction's), set for the observer's
  // lifetime whatever its mode, so that a second observer is refused. Attach: false when another
  // observer's is set.
  static bool Attach(RunObserver::State* state);
  static void Detach();
};

}  // namespace oomguard
