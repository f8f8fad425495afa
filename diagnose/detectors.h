// The detectors: what a run showed (RunObserver's observations, its measurement, its host-to-device
// copies during backward) turned into diagnoses, one per kind found, in the order of DiagnosisKind.
// They read what happened, never the scenario's knobs, so a layer list, a TorchScript module and a
// registered workload are diagnosed alike.
//
//   std::vector<oomguard::Diagnosis> found = oomguard::Diagnose(m, observer.observations(), copies);
//
// Note [What each detector counts]:
// - eval-keeps-graph: an evaluation that ends with autograd nodes it made still alive; bytes: what it
//   allocated and still holds then (the kept tensors and what their graphs saved), the largest of its
//   evaluations; none without bytes (nodes of a view of a parameter hold no memory).
// - graph-kept-across-iterations: nodes of iteration N alive at the end of N+1; bytes: what N's phases
//   outside backward, optimizer and zero_grad allocated and still hold then, per iteration; none
//   without bytes.
// - retained-grad: non-leaf tensors holding a .grad right after backward; bytes: those gradients.
// - leak: live bytes after each iteration growing by more than graph-kept-across-iterations explains;
//   bytes: the rest, per iteration, attributed to the phase and layer of the most of N's survivors.
// - transfer-in-recompute: host-to-device copies while backward ran, per step.
// - inplace-on-saved / inplace-on-leaf: autograd's error, with the in-place op the observer saw last
//   on a tensor of the error's shape (saved) or last started (leaf).
// - checkpoint-rng: random ops run again by a recomputation that does not replay the RNG state.
// - activations-dominate: at the peak, bytes the forward allocated above half of the peak.
#pragma once

#include <cstdint>
#include <vector>

#include "diagnose/run_observer.h"
#include "model/measurement.h"

namespace oomguard {

struct BackwardTransfers {
  int64_t count = 0;
  int64_t bytes = 0;
};

std::vector<Diagnosis> Diagnose(const VariantMeasurement& m, const RunObservations& seen,
                                const BackwardTransfers& transfers);

}  // namespace oomguard
