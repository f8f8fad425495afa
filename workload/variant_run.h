// The catalog's training loop: one variant's run over its model source (a layer list or a TorchScript
// module, nn/net_sources.h) with scenario.h's LoopSpec (zero_grad, micro-batches, autocast, backward,
// unscale, clipping, the optimizer step, evaluation) and PitfallSpec knobs. MeasureVariant
// (workload.h) measures it; a registered workload's function is the other kind of run
// (user_workload_run.h).
#pragma once

#include <memory>

#include "backends/backend.h"
#include "model/measurement.h"
#include "model/scenario.h"
#include "nn/layer_trace.h"
#include "workload/measured_run.h"
#include "workload/workload.h"

namespace oomguard {

std::unique_ptr<MeasuredRun> MakeVariantRun(const VariantSpec& spec, const VariantMeasureOptions& options,
                                            const BackendSession& backend, LayerTrace* trace, VariantMeasurement* m);

}  // namespace oomguard
