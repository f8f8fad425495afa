// The harness's side of an oomguard::Context (oomguard/workload.h): what a registered workload's run
// keeps while the function runs. Shared by the Context's member functions (context.cpp) and the run
// that makes one and reads it (workload/user_workload_run.cpp); not part of the public API.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/optim/optimizer.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "base/check.h"
#include "base/did_you_mean.h"
#include "diagnose/run_observer.h"
#include "model/knobs.h"
#include "model/phase.h"
#include "model/scenario.h"
#include "oomguard/workload.h"
#include "workload/grad_digest.h"
#include "workload/measured_run.h"
#include "workload/loop/optimizer.h"
#include "workload/loop/steady_state.h"
#include "workload/workload.h"

namespace oomguard {

// An undefined tensor (a parameter without a gradient) holds nothing.
inline int64_t TensorBytes(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

// The harness's side of a Context: the run's settings, the phase and iteration bookkeeping, and
// what the function told it to track.
struct Context::State {
  State(const VariantSpec& spec, const VariantMeasureOptions& options, const BackendSession& backend,
        RunObserver* observer, VariantMeasurement& m)
      : spec(spec),
        backend(backend),
        ledger(backend.account().ledger()),
        observer(observer),
        m(m),
        iterations(options.iterations > 0 ? options.iterations : spec.loop.iterations),
        eval_no_grad(options.eval_no_grad) {}

  const VariantSpec& spec;
  const BackendSession& backend;
  Ledger& ledger;
  RunObserver* observer;  // may be null
  VariantMeasurement& m;
  int64_t iterations;  // asked for; ctx.Iterations() may raise it (Note [The step that repeats])
  const bool eval_no_grad;
  std::optional<bool> grad_mode_before_eval;  // eval_no_grad: what an eval phase switched off

  oomguard::Phase phase = oomguard::Phase::kSetup;
  int64_t iteration = 0;  // the one running: 1..iterations; 0 before the loop (or without one)
  bool iterations_called = false;
  IterationMeasurement current;
  int64_t phase_start_live = 0;
  int64_t inputs_bytes = 0;  // ToDevice copies of the running iteration
  bool warned_host_batch_on_meta = false;

  std::vector<at::Tensor> parameters;
  torch::optim::Optimizer* optimizer = nullptr;
  // An optimizer LibTorch does not own (a Python one, python/core.cpp): its state tensors' bytes now,
  // or nullopt for a kind whose state cannot be read. Used when `optimizer` is null.
  std::function<std::optional<int64_t>()> optimizer_state_reader;
  // Gradients the tracked tensors do not hold (a Python DTensor parameter's: its local shard is tracked,
  // its .grad is on the DTensor): their bytes now, added to the tracked tensors' gradients.
  std::function<int64_t()> gradient_reader;
  std::optional<int64_t> optimizer_phase_growth;  // what the first optimizer phase left live
  std::map<std::string, std::string> knobs_read;  // name -> the type it was read as
  // ctx.ProcessGroup()'s, made on its first call (Note [A workload's own ranks], user_workload_run.h).
  c10::intrusive_ptr<c10d::Backend> group;

  bool first() const { return iteration <= 1; }

  void SwitchPhase(oomguard::Phase next, bool unwinding) {
    if (!unwinding) EndPhase();
    if (eval_no_grad) ForceNoGradInEval(next);
    phase = next;
    phase_start_live = ledger.live_bytes();
    ledger.SetPhase(Name(next));
  }

  void ForceNoGradInEval(oomguard::Phase next) {
    if (next == oomguard::Phase::kEval && !grad_mode_before_eval) {
      grad_mode_before_eval = c10::GradMode::is_enabled();
      c10::GradMode::set_enabled(false);
    } else if (next != oomguard::Phase::kEval && grad_mode_before_eval) {
      c10::GradMode::set_enabled(*grad_mode_before_eval);
      grad_mode_before_eval.reset();
    }
  }

  // Note [A workload's numbers], user_workload_run.h.
  void EndPhase() {
    const int64_t live = ledger.live_bytes();
    if (phase == oomguard::Phase::kForward && first() && !m.forward_saved_bytes)
      m.forward_saved_bytes = live - phase_start_live;
    if (phase == oomguard::Phase::kBackward) {
      current.live_after_backward_bytes = live;
      if (first() && !m.grad_bytes) TakeGradients();
      if (observer) observer->BackwardDone();
    }
    if (phase == oomguard::Phase::kEval && observer) observer->EvalDone();
    if (phase == oomguard::Phase::kOptimizer && first() && !optimizer_phase_growth) {
      optimizer_phase_growth = live - phase_start_live;
      // The tracked optimizer is alive here, as it may not be when a function without
      // ctx.Iterations() returns: its state is read now, not guessed from the phase's growth.
      if (optimizer || optimizer_state_reader) m.optimizer_state_bytes = ReadOptimizerState();
    }
  }

  void TakeGradients() {
    if (parameters.empty()) return;
    std::vector<at::Tensor> grads;
    int64_t bytes = gradient_reader ? gradient_reader() : 0;
    for (const at::Tensor& p : parameters) {
      grads.push_back(p.grad());
      bytes += TensorBytes(p.grad());
    }
    m.grad_bytes = bytes;
    m.grad_digest = GradDigest(grads, backend.traits().has_data);
  }

  void BeginIteration(int64_t index) {
    // Setup ends where the loop begins: what the loop does outside marked phases is "step".
    if (phase == oomguard::Phase::kSetup) SwitchPhase(oomguard::Phase::kStep, /*unwinding=*/false);
    iteration = index;
    current = {};
    inputs_bytes = 0;
    ledger.TakeWindowPeak();
    if (observer) observer->BeginIteration(index);
  }

  void EndIteration() {
    EndPhase();
    phase_start_live = ledger.live_bytes();
    if (first()) {
      if (!m.grad_bytes) TakeGradients();
      TakeOptimizerState();
    }
    current.live_after_bytes = ledger.live_bytes();
    current.peak_bytes = ledger.TakeWindowPeak();
    m.iterations.push_back(current);  // only completed iterations count
    inputs_bytes = 0;
    if (observer) observer->EndIteration();
  }

  void TakeOptimizerState() {
    if (m.optimizer_state_bytes) return;
    std::optional<int64_t> from_state = ReadOptimizerState();
    if (from_state) {
      m.optimizer_state_bytes = from_state;
    } else if (optimizer_phase_growth) {
      m.optimizer_state_bytes = optimizer_phase_growth;
    }
  }

  std::optional<int64_t> ReadOptimizerState() const {
    if (optimizer) return OptimizerStateBytes(*optimizer);
    if (optimizer_state_reader) return optimizer_state_reader();
    return std::nullopt;
  }

  // A run that never looped over its iterations (`loop`: "ctx.Iterations()" or Python's
  // "m.iterations(n)") is measured as one: its end is the first iteration's. `kind`: "the workload",
  // `who`: its name for the warning.
  void EndWithoutIterations(const std::string& kind, const std::string& who, const std::string& loop) {
    m.steady_state = "one run: " + kind + " never calls " + loop;
    m.warnings.push_back(who + " never calls " + loop +
                         ", so it is measured as one run: live growth, leaks and the step that repeats (with the "
                         "optimizer's state) are not measured; loop over " + loop);
    EndPhase();
    if (!m.grad_bytes) TakeGradients();
    TakeOptimizerState();
  }

  // What was live when a refused allocation was asked for, by category (MeasuredRun::Breakdown).
  LiveBreakdown Breakdown(int64_t live_at_refusal) const {
    LiveBreakdown b = BreakdownByCategory(live_at_refusal, m, parameters, inputs_bytes);
    const int64_t untracked_gradients = gradient_reader ? gradient_reader() : 0;
    b.gradients_bytes += untracked_gradients;
    b.activations_and_transient_bytes -= untracked_gradients;
    return b;
  }

  // The knob, checked against the type asked for: nullptr when the variant does not set it.
  const KnobValue* Knob(const std::string& name, const std::string& type) {
    knobs_read.emplace(name, type);
    auto it = spec.knobs.find(name);
    return it == spec.knobs.end() ? nullptr : &it->second;
  }

  [[noreturn]] void Missing(const std::string& name, const std::string& type) const {
    std::vector<std::string> unread;  // a misspelling of this knob would be one of them
    for (const auto& [set, value] : spec.knobs) {
      if (knobs_read.count(set) == 0) unread.push_back(set);
    }
    const std::string near = ClosestMatch(name, unread);
    throw WorkloadError("workload '" + spec.workload + "' reads knob \"" + name + "\" (" + type + "), which variant '" +
                        spec.name + "' does not set" +
                        (near.empty() ? ": add it under \"knobs\", e.g. \"knobs\": {\"" + name + "\": ...}"
                                      : "; it sets \"" + near + "\": did you mean \"" + name + "\"?"));
  }

  [[noreturn]] void WrongType(const std::string& name, const std::string& type, const KnobValue& value) const {
    throw WorkloadError("knob \"" + name + "\" is read as " + type + " by workload '" + spec.workload +
                        "', but variant '" + spec.name + "' sets it to " + FormatKnob(value) + " (" +
                        KnobTypeName(value) + ")");
  }

  // After the function completed: every knob the variant sets was read.
  void CheckEveryKnobRead() const {
    std::vector<std::string> read;
    for (const auto& [name, type] : knobs_read) read.push_back(name);
    for (const auto& [name, value] : spec.knobs) {
      if (knobs_read.count(name) != 0) continue;
      const std::string near = ClosestMatch(name, read);
      throw WorkloadError("variant '" + spec.name + "' sets knob \"" + name + "\", which workload '" + spec.workload +
                          "' never reads" + (near.empty() ? "" : "; did you mean \"" + near + "\"?") +
                          (read.empty() ? " (it reads no knobs)" : " (it reads: " + JoinNames(read, ", ") + ")"));
    }
  }
};

}  // namespace oomguard
