// Loads scenario files (scenarios/FORMAT.md describes the format) into the plain types of scenario.h.
//
//   std::vector<std::string> files;
//   std::string error;
//   if (!FindScenarioFiles({"scenarios"}, &files, &error)) { ... a path that does not exist ... }
//   for (const std::string& file : files) {
//     Scenario scenario;
//     if (!LoadScenarioFile(file, &scenario, &error)) { ... UNRESOLVED with `error`, go on ... }
//   }
//
// Error policy: bad input returns false with one line in *error, naming where the problem is:
//   "FILE:LINE:COL: JSON syntax error: <what>"   for text that is not JSON
//   "FILE: at PATH: <what>"                      for everything else, with PATH as written in the file:
//                                                loop.eval.no_grad, model.layers[2].in, expect.fixed.checks[1],
//                                                variants.pitfall.loop.retain_graph; "top level" for the root
// The first error wins. Nothing here throws; on failure *out is left unchanged.
//
// What is checked: every key is known (unknown ones get a did-you-mean), every value has the right type,
// range or enumeration value, layers take only the fields of their kind, each variant's merge patch is
// valid where it is written, the merged variant satisfies the cross-field rules of variant_rules.h,
// expectations name existing variants, and every check expression parses (check_expression.h) and names
// existing variants. Files may contain // and /* */ comments; duplicate keys are errors.
#pragma once

#include <string>
#include <vector>

#include "model/scenario.h"

namespace oomguard {

// Reads and validates the file at `path`; out->file is set to `path`.
[[nodiscard]] bool LoadScenarioFile(const std::string& path, Scenario* out, std::string* error);

// The same for text already in memory; `file_label` is used for out->file and in messages.
[[nodiscard]] bool LoadScenarioText(const std::string& json_text, const std::string& file_label, Scenario* out,
                                    std::string* error);

// Expands `paths` into scenario files: a file is taken as it is; a folder gives every *.json directly
// inside it, whatever it is (a broken link or a folder named x.json is taken, and fails to load as UNRESOLVED;
// other names such as FORMAT.md are ignored; subfolders are not searched). The result is
// sorted and without duplicates. Fails for a path that does not exist: "PATH: no such file or folder".
[[nodiscard]] bool FindScenarioFiles(const std::vector<std::string>& paths, std::vector<std::string>* files,
                                     std::string* error);

// The scenario called `name` among the files of `paths` (files that do not load are passed over).
// Fails with FindScenarioFiles' message, or "no scenario named 'NAME'; known: a, b", with a
// did-you-mean before the list when a known name is a near spelling.
[[nodiscard]] bool LoadScenarioByName(const std::vector<std::string>& paths, const std::string& name, Scenario* out,
                                      std::string* error);

// What a command's scenario argument names: a file when it has a '/' or ends in .json, else a
// scenario's name among `paths` (LoadScenarioByName).
[[nodiscard]] bool LoadScenarioArgument(const std::vector<std::string>& paths, const std::string& argument,
                                        Scenario* out, std::string* error);

}  // namespace oomguard
