// The CSV report (`--report csv=FILE`): one row per variant, for a spreadsheet, pandas or a CI step
// that charts peaks across runs.
//
//   std::string csv = oomguard::RenderCsv(report);
//   // scenario,variant,backend,card,cap_bytes,result,outcome,peak_bytes,peak_phase,live_after_last_bytes,...
//   // forgotten-no-grad,pitfall,cpu,NVIDIA T4 16GB,15827015680,PASS,pass,6303744,eval,2098176,...
//
// Columns, in order: scenario, variant, backend, card (empty for a plain cap), cap_bytes, result (PASS,
// FAIL, ...), outcome (pass, oom, error:<category>), peak_bytes, peak_phase, live_after_last_bytes,
// baseline_peak_bytes, peak_delta_bytes, peak_delta_percent (one decimal), baseline_verdict. Numbers are
// plain integers in bytes; a cell without data (no measurement, no baseline) is empty. A scenario
// without variants (a file that did not load, an unsupported backend) has one row with an empty variant.
//
// Quoting is RFC 4180's: a field holding a comma, a double quote or a line break is quoted, with quotes
// doubled. A text field that starts with = + - @ (what a spreadsheet would run as a formula) is prefixed
// with ', as OWASP advises against CSV injection. Lines end with CRLF, as RFC 4180 says. Deterministic;
// rendering never fails.
#pragma once

#include <string>

#include "model/run_results.h"

namespace oomguard {

std::string RenderCsv(const RunResults& report);

}  // namespace oomguard
