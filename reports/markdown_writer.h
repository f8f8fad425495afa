// The Markdown report (`--report md=FILE`): a CI job summary, e.g. appended to GitHub's
// $GITHUB_STEP_SUMMARY.
//
//   std::string md = oomguard::RenderMarkdown(report);
//   // **oomguard: FAIL** — 2 of 4 scenarios failing, 1 memory regression
//   //
//   // | scenario | variant | backend | card | outcome | peak | reserved | baseline | delta | delta % | peak phase |
//   // |---|---|---|---|---|---:|---:|---:|---:|---:|---|
//   // | bad&amp;name&lt;"x"&gt; | a&lt;b&gt;&amp;c | cpu | NVIDIA T4 16GB | **FAIL** (regressed) | 18.00 MiB | ...
//
// Contents, in order:
// - the verdict, alone on the first line: FAIL when any scenario's result is a failure (IsFailure);
// - a line naming the backend, the run's duration and the versions;
// - one table row per variant (a scenario without variants gets one row, variant "—"): regressions first,
//   then other failures, then the rest, each group in report order. peak is the ledger's (allocated
//   bytes), reserved the caching allocator model's reserved peak (— without a model); baseline/delta/
//   delta % compare the peak (the comparison's first metric);
// - "Regressions": each regressed variant's metric diffs; "Failures": each failing variant's reasons, each
//   failing scenario's error, and every failed relation check;
// - a line suggesting `oomguard run --update-baselines` when a variant improved beyond tolerance, and a
//   note on variants without a stored baseline (they fail under --strict).
//
// Every name, reason and path is escaped: `|` becomes `\|`, line breaks become spaces, Markdown markup
// characters are backslash-escaped and & < > become HTML entities (GitHub renders inline HTML). Byte
// figures use FormatBytes, deltas FormatSignedBytes and a signed percentage with one decimal ("+11.1%").
// Deterministic, and rendering never fails.
#pragma once

#include <string>

#include "model/run_results.h"

namespace oomguard {

std::string RenderMarkdown(const RunResults& report);

}  // namespace oomguard
