// The child's side of a run: measures one variant, as its MeasureRequest (run/child_protocol.h)
// says, and writes the measurement JSON for the parent to judge.
//
//   MeasureRequest request;
//   if (!ParseMeasureRequest(args, &request, &error)) return kExitUsage;
//   return oomguard::MeasureInChild(request, std::cerr);
//
// Error policy: returns kExitOk once the measurement is written, whatever its outcome (an OOM is a
// measurement, not an error); kExitUsage, with a one-line message on `err`, when the scenario does not
// load, has no such variant, its limits are bad, or the output cannot be written. The parent reports a
// child that did not exit kExitOk as UNRESOLVED with the end of its stderr.
//
// Two ways in: a spawned child (`oomguard __measure`, MeasureInChild) loads its variant alone from
// the runner's --variant-file (Note [Parse once]), or, run by hand without one, the scenario file; a
// forked one (MeasureForkedVariant, run/runner.cpp) was given both, resolved by the
// parent before the fork, and parses nothing.
#pragma once

#include <ostream>

#include "model/scenario.h"
#include "run/child_protocol.h"

namespace oomguard {

[[nodiscard]] int MeasureInChild(const MeasureRequest& request, std::ostream& err);

// In a child forked from the runner: `variant` of `scenario`, with the request's flags and out_path
// (its scenario_file and variant only name them).
[[nodiscard]] int MeasureForkedVariant(const Scenario& scenario, const VariantSpec& variant,
                                       const MeasureRequest& request, std::ostream& err);

}  // namespace oomguard
