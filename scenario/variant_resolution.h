// One variant of a scenario file, resolved: the base merged with the variant's patch (a JSON merge
// patch, RFC 7386), read into a VariantSpec, checked against the cross-field rules, its TorchScript
// file found, and written out again as a scenario of that variant alone (VariantSpec::document).
//
//   VariantSpec spec;
//   if (!ResolveVariant(scenario, base, "pitfall", patch, &spec, &error)) return false;
//   spec.document;  // {"name": ..., "summary": ..., <the merged base>, "variants": {"pitfall": {}}}
//
// Note [Parse once]: the document is what a spawned child is given (run/child_protocol.h,
// --variant-file): it loads that variant alone, already merged and checked by the runner, instead of
// parsing and validating the whole scenario file again. It is the merged JSON itself, not a VariantSpec
// written back field by field, so no field can be lost on the way: the child reads it with the very
// readers that read the file. Checks and expectations are left out (the runner judges them); a
// TorchScript path is written absolute, since the document lives in a scratch folder.
//
// Error policy: as the loader's (scenario_loader.h), without the file name, which the loader puts in
// front: a problem in what the patch wrote points into variants.NAME; one in the base says which
// variant met it. On failure *out is unspecified.
#pragma once

#include <string>

#include "model/scenario.h"
#include "scenario/json_diagnostics.h"

namespace oomguard {

// The top-level keys of a scenario file that make a variant, in the order a document writes them (so
// that a document loaded again writes the same text).
inline constexpr const char* kVariantKeys[] = {"model",    "data", "loop",     "pitfalls",
                                               "parallel", "seed", "workload", "knobs"};

// `scenario` gives the file (for the TorchScript path) and the document's name, summary, backends and
// card or cap; `base` holds the file's top-level variant keys (model, data, loop, ...).
[[nodiscard]] bool ResolveVariant(const Scenario& scenario, const OrderedJson& base, const std::string& name,
                                  const OrderedJson& patch, VariantSpec* out, std::string* error);

}  // namespace oomguard
