#include "run/output_collisions.h"

#include <map>

#include "base/file_identity.h"
#include "baselines/baseline_store.h"

namespace oomguard {

bool CheckOutputsDistinct(const std::vector<OutputFile>& outputs, std::string* error) {
  std::map<std::string, const OutputFile*> first_by_file;
  for (const OutputFile& output : outputs) {
    const std::string identity = FileIdentity(output.path);
    if (identity.empty()) continue;  // a standard stream
    const auto [it, fresh] = first_by_file.emplace(identity, &output);
    if (!fresh) {
      *error = it->second->flag + " and " + output.flag + " write the same file; give each output a file of its own";
      return false;
    }
  }
  return true;
}

bool CheckOutputsSpareInputs(const std::vector<OutputFile>& outputs, const RunPlan& plan,
                             const std::string& baselines_dir, std::string* error) {
  std::map<std::string, std::string> input_by_file;  // identity -> "a scenario file this run reads: F"
  const auto add = [&](const std::string& path, const std::string& what) {
    if (const std::string identity = FileIdentity(path); !identity.empty()) {
      input_by_file.emplace(identity, what + " " + path);
    }
  };
  for (const PlannedScenario& p : plan.scenarios) {
    add(p.result.file, "the scenario file");
    if (p.scenario.name.empty()) continue;  // did not load
    add(BaselinePath(BaselineDirectory(baselines_dir, p.result.file), p.scenario.name), "the baseline file");
    for (const VariantSpec& v : p.scenario.variants) {
      if (!v.model.torchscript.empty()) add(v.model.torchscript, "the TorchScript module");
    }
  }
  for (const OutputFile& output : outputs) {
    const std::string identity = FileIdentity(output.path);
    if (const auto it = input_by_file.find(identity); !identity.empty() && it != input_by_file.end()) {
      *error = output.flag + " would overwrite " + it->second + ", which this run reads; write it elsewhere";
      return false;
    }
  }
  return true;
}

}  // namespace oomguard
