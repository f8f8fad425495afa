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
#pragma once

#include <ostream>

#include "run/child_protocol.h"

namespace oomguard {

[[nodiscard]] int MeasureInChild(const MeasureRequest& request, std::ostream& err);

}  // namespace oomguard
