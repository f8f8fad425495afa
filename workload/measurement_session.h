// One measurement's hold on a backend, as a scope: what MeasureVariant sets up around a run (the
// backend session, the limits, the ledger's reset and timeline, the transfer counter, the detectors'
// observer, the snapshot, the caching-allocator model, host scalars) from its constructor, and the
// numbers from Finish. MeasureVariant's MeasureOnce runs its MeasuredRun inside one; code that is not
// a function (oomguard::MeasureScope, oomguard/measure.h: Python's `with oomguard.measure(...)`) begins
// one, runs, and finishes it.
//
//   VariantMeasurement m;
//   MeasurementSession session(spec, options, RunObserver::Mode::kWatch, &m);  // limits on, statistics reset
//   ... allocate on session.backend().device() ...
//   session.RecordFailure(e, run);                 // an OOM or LibTorch error, when one ended the run
//   MeasurementSession::Observed seen = session.Finish();  // m: ledger, transfers, backend's own numbers
//   // the limits stay until the session is destroyed
//
// One at a time per process (the accounts are process-wide); the caller serialises.
#pragma once

#include <exception>
#include <memory>

#include "diagnose/detectors.h"
#include "diagnose/run_observer.h"
#include "model/measurement.h"
#include "model/scenario.h"
#include "workload/workload.h"

namespace oomguard {

class BackendSession;
class LayerTrace;
class MeasuredRun;

class MeasurementSession {
 public:
  // What the observer saw, for Diagnose once the run is over.
  struct Observed {
    RunObservations seen;
    std::string suspicion;  // a screen's (Note [Screen, then watch], workload.cpp)
    BackwardTransfers transfers;
  };

  MeasurementSession(const VariantSpec& spec, const VariantMeasureOptions& options, RunObserver::Mode mode,
                     VariantMeasurement* m);
  ~MeasurementSession();
  MeasurementSession(const MeasurementSession&) = delete;
  MeasurementSession& operator=(const MeasurementSession&) = delete;

  const BackendSession& backend() const;
  LayerTrace* trace();
  RunObserver* observer();  // null without options.diagnose

  // A failure that ended the run (Note [What a variant catches], workload.cpp) into m's outcome, error
  // and OOM detail; `run` gives the live bytes by category (null: all of them activations and transients).
  void RecordFailure(const std::exception& e, const MeasuredRun* run);
  // The numbers into m; call once, after the run.
  Observed Finish();

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace oomguard
