// The measured fix of a diagnosis: the variant rerun with the fix applied, where the fix is a knob of
// its model source (a layer list's or a TorchScript module's loop and pitfall knobs; for a registered
// workload, no_grad over its eval phases and a smaller "batch" knob), and the peak and live bytes it gives.
//
//   VariantMeasurement m = MeasureVariant(spec, options);   // m.diagnoses from the detectors
//   oomguard::MeasureFixes(spec, options, &m);              // each diagnosis' `measured`, best first
//
// Note [Which fixes are measured]: by kind, each fix whose knob the variant has and has not applied:
// - eval-keeps-graph: loop.eval.no_grad true (a workload: its eval phases under no_grad); kept eval
//   losses as numbers (loop.loss_history.keep "item");
// - graph-kept-across-iterations: the kept loss as a number, with retain_graph off;
// - retained-grad: pitfalls.retain_grad off;
// - leak: kept detached losses as numbers;
// - transfer-in-recompute: pitfalls.transfer "outside" (before the checkpointed region);
// - inplace-on-saved: the out-of-place op (pitfalls.inplace.op without its underscore);
// - checkpoint-rng: pitfalls.checkpoint.preserve_rng_state true;
// - activations-dominate: half the batch with twice the micro-batches (a workload: knobs.batch halved,
//   which halves its effective batch too), sqrt(layers) checkpoint segments, bf16 autocast.
// inplace-on-leaf has no knob to measure (the fix is no_grad around the edit). Each rerun runs under
// the same limits without detectors; its outcome is reported, an OOM included.
#pragma once

#include "model/measurement.h"
#include "model/scenario.h"
#include "workload/workload.h"

namespace oomguard {

void MeasureFixes(const VariantSpec& spec, const VariantMeasureOptions& options, VariantMeasurement* m);

}  // namespace oomguard
