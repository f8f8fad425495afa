#include "scenario/variant_resolution.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "base/json_text.h"
#include "scenario/variant_json.h"
#include "scenario/variant_rules.h"
#include "scenario/workload_json.h"

namespace oomguard {
namespace {

// model.torchscript is relative to the scenario file's folder; the file must exist and be a file.
bool ResolveModelFile(const std::string& scenario_file, std::string* path, std::string* problem) {
  if (!path->starts_with("/")) {
    const size_t slash = scenario_file.rfind('/');
    if (slash != std::string::npos) *path = scenario_file.substr(0, slash + 1) + *path;
  }
  struct stat info {};
  if (stat(path->c_str(), &info) != 0) {
    *problem = "no such file: " + *path + " (a path relative to the scenario file's folder; write it with " +
               "torch.jit.script(model).save(...))";
    return false;
  }
  if (!S_ISREG(info.st_mode)) {
    *problem = *path + " is not a file (expected a TorchScript module saved with torch.jit.save)";
    return false;
  }
  return true;
}

std::string AbsolutePath(const std::string& path) {
  char* resolved = realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return path;  // it was just stat()ed; a race leaves the child to report it
  std::string absolute = resolved;
  free(resolved);
  return absolute;
}

// Note [Parse once]: the variant alone, as a scenario file the loader reads back into the same spec.
std::string OneVariantDocument(const Scenario& scenario, const std::string& name, const OrderedJson& merged) {
  OrderedJson doc = OrderedJson::object();
  doc["name"] = scenario.name;
  doc["summary"] = scenario.summary;
  doc["backends"] = scenario.backends;
  if (!scenario.card.empty()) doc["card"] = scenario.card;
  if (!scenario.cap.empty()) doc["cap"] = scenario.cap;
  for (const char* key : kVariantKeys) {
    if (merged.contains(key)) doc[key] = merged[key];
  }
  doc["variants"][name] = OrderedJson::object();
  return DumpJson(doc);
}

}  // namespace

bool ResolveVariant(const Scenario& scenario, const OrderedJson& base, const std::string& name,
                    const OrderedJson& patch, VariantSpec* out, std::string* error) {
  OrderedJson merged = base;
  merged.merge_patch(patch);
  VariantSpec spec;
  const JsonPath at = JsonPath().Key("variants").Key(name);
  if (!ReadFields(merged, at, VariantConfigFields(&spec, /*patch=*/false), false, error)) return false;
  spec.name = name;
  // Where a rule is broken: in the patch when it wrote the key, else in the base, naming the variant.
  const auto fail = [&](const JsonPath& path, const std::string& message) {
    if (IsWrittenIn(patch, path)) return Fail(at.Append(path), message, error);
    return Fail(path, message + " (variant " + name + ")", error);
  };
  std::optional<WorkloadRuleProblem> key_problem = FindWorkloadRuleProblem(merged);
  if (!key_problem) key_problem = FindModelKeyProblem(merged);
  if (key_problem) return fail(key_problem->path, key_problem->message);
  if (!spec.model.torchscript.empty()) {
    std::string problem;
    if (!ResolveModelFile(scenario.file, &spec.model.torchscript, &problem)) {
      return fail(JsonPath().Key("model").Key("torchscript"), problem);
    }
    spec.model.source = "torchscript";
    merged["model"]["torchscript"] = AbsolutePath(spec.model.torchscript);
  }
  // A workload's model, data and loop are code: the layer-list rules apply to the others only.
  if (std::optional<SpecProblem> problem = spec.workload.empty() ? FindSpecProblem(spec) : std::nullopt) {
    return fail(problem->path, problem->message);
  }
  spec.document = OneVariantDocument(scenario, name, merged);
  *out = std::move(spec);
  return true;
}

}  // namespace oomguard
