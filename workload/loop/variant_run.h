// The catalog's training loop: one variant's run over its model source (a layer list or a TorchScript
// module, nn/net_sources.h) with scenario.h's LoopSpec (zero_grad, micro-batches, autocast, backward,
// unscale, clipping, the optimizer step, evaluation) and PitfallSpec knobs. MeasureVariant
// (workload.h) measures it; a registered workload's function is the other kind of run
// (user_workload_run.h).
#pragma once

#include <memory>

#include "backends/backend.h"
#include "diagnose/run_observer.h"
#include "model/measurement.h"
#include "model/scenario.h"
#include "nn/layer_trace.h"
#include "workload/measured_run.h"
#include "workload/workload.h"

namespace oomguard {

// `observer` (may be null) is told where the loop is (diagnose/run_observer.h).
std::unique_ptr<MeasuredRun> MakeVariantRun(const VariantSpec& spec, const VariantMeasureOptions& options,
                                            const BackendSession& backend, LayerTrace* trace, RunObserver* observer,
                                            VariantMeasurement* m);

}  // namespace oomguard
