// One trial of `oomguard fit`: a variant measured in this process (MeasureVariant) with its knob set to
// a value, under a target's cap, and the check that it left its account's ledger as it found it.
//
//   std::string error;
//   if (!oomguard::CheckKnob("seq", spec, 1, 4096, &error)) { ... usage error ... }
//   oomguard::TrialFunction trial = oomguard::MakeFitTrial(spec, "seq", oomguard::Backend::kMeta, /*iterations=*/0);
//   oomguard::Trial t = trial(512, {"t4", t4_cap});  // kFits with the peak, kOom, or kError
//
// Each trial runs on a thread of its own, joined before it returns (Note [A fresh thread per trial] in
// fit_trial.cpp: an OOM in backward leaves graph pieces on the thread that ran it).
//
// Knobs: "batch" sets data.batch; "seq" sets data.shape[0], the sequence length, which only exists for
// token ids (data.dtype int64) and for samples shaped [seq, features]. A workload scenario's knob is
// any integer knob of its workload, set under "knobs". "world" sets parallel.world of a variant with
// `parallel` (fit_world.h), and its trial measures rank 0 and the last rank (Note [Which ranks a world
// fit measures]), a workload's its parallel.rank (Note [A workload's world fit]); a message names them:
// "at world 8 rank 7".
//
// Error policy: bad knobs are user input: CheckKnob returns false with a one-line message. A trial's
// OOM or error outcome is its result. A trial that leaves the ledger's live bytes different from what
// they were before it throws LeakBetweenTrials: every later trial would measure on top of the leftover,
// so the fit cannot go on. A trial whose input is wrong throws InputErrorInTrial.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "fit/fit_search.h"
#include "model/backend.h"
#include "model/scenario.h"
#include "workload/workload.h"

namespace oomguard {

// What the knob sets, as a scenario file names it: "data.batch", "data.shape[0]", "parallel.world",
// and for a workload scenario "knobs.<knob>".
std::string KnobField(const std::string& knob, const VariantSpec& spec);

// Whether `spec` can run with the knob anywhere in [min_value, max_value]; else false with the reason.
[[nodiscard]] bool CheckKnob(const std::string& knob, const VariantSpec& spec, int64_t min_value, int64_t max_value,
                             std::string* error);

// `spec` with the knob set to `value` (CheckKnob first); world: as rank 0.
VariantSpec WithKnob(const VariantSpec& spec, const std::string& knob, int64_t value);

class LeakBetweenTrials : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A trial found the variant's input wrong (a workload and its scenario disagree: a knob misspelt, an
// unknown phase): no value of the knob can fit, and the fit exits 2, as `run` does.
class InputErrorInTrial : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A trial ran past --timeout: "variant 'v' at batch 64 on t4: timed out after 300 s (--timeout)".
//
// Note [A trial that does not end]
// `run` kills a variant's child at --timeout; fit measures in its own process, where a forward that
// never returns cannot be stopped. So each trial's thread is watched: past the timeout it is left
// running (detached, with what it uses held by it alone) and TrialTimedOut is thrown, and the fit
// prints the trial and exits 1 at once (std::_Exit: the stuck thread still uses LibTorch, which
// static destructors would tear down under it). As run's TIMEOUT, it is a failure, not an input
// error. Trials in children, as run's, would cost a LibTorch start-up or a fork per trial for what
// only a hanging workload needs.
class TrialTimedOut : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The seam tests use to make a trial leak; MeasureVariant otherwise.
using MeasureFunction = std::function<VariantMeasurement(const VariantSpec&, const VariantMeasureOptions&)>;

// A trial of `spec` on `backend` (available: GetBackend(backend).Available); iterations 0 keeps the
// variant's own. The target's limits are its card's (LimitsForCard) or, for a plain cap, LimitsForCap.
// The ledger checked for leaks is the backend's account's. A trial longer than timeout_seconds throws
// TrialTimedOut.
// model_cuda and alloc_conf: the caching allocator's model (VariantMeasureOptions); with kVerdict a
// trial's peak is the model's reserved peak, and its allocated peak the ledger's (Note [Reserved
// peaks across caps], fit_search.h).
TrialFunction MakeFitTrial(const VariantSpec& spec, const std::string& knob, Backend backend, int64_t iterations,
                           double timeout_seconds = 300, MeasureFunction measure = MeasureVariant,
                           ModelCuda model_cuda = ModelCuda::kOff, CachingAllocatorConfig alloc_conf = {},
                           bool cuda_kernels = false);

// The kernels a meta trial at `target` mirrors with --kernels cuda: the card's, or sm_80 for a plain
// cap, with *warning saying so (Note [Kernels of a meta run], run/run_options.h).
KernelTarget CudaKernelsForTarget(const FitTarget& target, std::string* warning);

}  // namespace oomguard
