// A diagnosis: one of the catalog's pitfalls found in a run by watching it (diagnose/detectors.h), with
// the bytes it costs and, when measured (--diagnose, explain), what the fix gives. Plain data; every
// report renders it and a scenario's "diagnoses" expectation names kinds.
//
//   Diagnosis d;
//   d.kind = DiagnosisKind::kRetainedGrad;
//   d.bytes = 2097152;            // what it accounts for: at the peak, per iteration, or per step (`per`)
//   d.fix_peak_bytes = 6090840;   // the variant rerun with the fix applied
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/enum_names.h"

namespace oomguard {

// Stable names, used in every output and in scenario files' "diagnoses" lists.
enum class DiagnosisKind {
  kEvalKeepsGraph,             // tensors with a grad function made in an eval phase, alive at its end
  kGraphKeptAcrossIterations,  // graph nodes of iteration N alive at the end of iteration N+1
  kRetainedGrad,               // non-leaf tensors holding a .grad after backward
  kLeak,                       // live bytes growing per iteration that no other kind explains
  kTransferInRecompute,        // host-to-device copies during backward (redone by a recomputation)
  kInplaceOnSaved,             // autograd's version-counter error: a saved tensor edited in place
  kInplaceOnLeaf,              // an in-place edit of a leaf that requires grad, outside no_grad
  kCheckpointRng,              // a checkpointed region recomputed random draws without its RNG state
  kActivationsDominate,        // activations above half of the peak
};

template <>
struct EnumNames<DiagnosisKind> {
  static constexpr std::array<std::string_view, 9> kNames = {"eval-keeps-graph",      "graph-kept-across-iterations",
                                                             "retained-grad",         "leak",
                                                             "transfer-in-recompute", "inplace-on-saved",
                                                             "inplace-on-leaf",       "checkpoint-rng",
                                                             "activations-dominate"};
};

// A pitfall is a mistake with a fix that changes nothing else; advice (activations-dominate) is a
// trade: the fixes it measures cost time or change the batch. Reports label them so; both are
// diagnoses, and a scenario's "diagnoses" expectation lists both.
inline bool IsAdvice(DiagnosisKind kind) { return kind == DiagnosisKind::kActivationsDominate; }
inline std::string_view Severity(DiagnosisKind kind) { return IsAdvice(kind) ? "advice" : "pitfall"; }

// When `bytes` counts: live at the peak; kept per iteration; made or moved per step; alive at the end of
// the phase that made them; once (one tensor's bytes).
enum class DiagnosisPer { kPeak, kIteration, kStep, kPhaseEnd, kOnce };

template <>
struct EnumNames<DiagnosisPer> {
  static constexpr std::array<std::string_view, 5> kNames = {"peak", "iteration", "step", "phase_end", "once"};
};

// One fix measured: the variant rerun with it applied.
struct MeasuredFix {
  std::string fix;               // what was changed, as a scenario writes it: "loop.eval.no_grad: true"
  std::string outcome;           // the rerun's outcome ("pass"; a fix may fail otherwise)
  int64_t peak_bytes = 0;        // the rerun's peak
  int64_t live_after_bytes = 0;  // live after its last iteration
  std::optional<double> live_growth_per_iteration;  // absent below 2 iterations
  std::string error;  // an error's message (outcome "error:..."): the fix did not run, its numbers mean nothing
};

struct Diagnosis {
  DiagnosisKind kind = DiagnosisKind::kLeak;
  int64_t bytes = 0;  // what it accounts for (`per` says when)
  DiagnosisPer per = DiagnosisPer::kPeak;
  int64_t count = 0;    // tensors, nodes, copies or draws it found (0: not a count)
  std::string phase;    // where the bytes were allocated (or the error happened)
  std::string where;    // the layer, stage or autograd node, when the run can name one; else empty
  std::string message;  // one line: what was found
  std::string fix;      // the fix, in words
  // The run's ledger event at which the bytes' phase began (the HTML timeline marks it); -1: unknown.
  int64_t event_index = -1;
  // --diagnose / explain: the fixes measured, the best (lowest peak) first. Empty: not measured (no
  // knob of the model source applies, or the run did not ask).
  std::vector<MeasuredFix> measured;
};

}  // namespace oomguard
