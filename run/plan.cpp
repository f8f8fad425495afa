#include "run/plan.h"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/byte_size.h"
#include "base/files.h"
#include "base/host_memory.h"
#include "base/shard.h"
#include "model/backend.h"
#include "scenario/catalog.h"
#include "scenario/scenario_loader.h"
#include "workload/workload_registry.h"

namespace oomguard {
namespace {

// A results file written by `oomguard run --json` into a folder that is also scanned for scenarios.
bool IsResultsFile(const std::string& path) {
  std::string content, ignored;
  if (!ReadFile(path, &content, &ignored)) return false;
  const nlohmann::json j = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("schema_version") && j.contains("scenarios");
}

std::string Joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& item : items) s += (s.empty() ? "" : ", ") + item;
  return s;
}

// --filter SCENARIO[/VARIANT]: a glob on scenario names and, after the first '/', one on variant names
// (names hold no '/': FORMAT.md); none: every variant.
struct Filter {
  std::string scenario;
  std::optional<std::string> variant;
};

Filter SplitFilter(const std::string& filter) {
  const size_t slash = filter.find('/');
  if (slash == std::string::npos) return {filter, std::nullopt};
  return {filter.substr(0, slash), filter.substr(slash + 1)};
}

bool Matches(const std::string& glob, const std::string& name) { return fnmatch(glob.c_str(), name.c_str(), 0) == 0; }

// Keeps the variants the filter's variant glob selects, naming the others in left_out; false when it
// selects none.
bool SelectVariants(const std::string& glob, Scenario* scenario) {
  std::vector<VariantSpec> kept;
  for (VariantSpec& v : scenario->variants) {
    if (Matches(glob, v.name)) {
      kept.push_back(std::move(v));
    } else {
      scenario->left_out.push_back(v.name);
    }
  }
  scenario->variants = std::move(kept);
  return !scenario->variants.empty();
}

// The planned result of a scenario that does not run: its code is final here.
void NotRun(ResultCode code, const std::string& reason, PlannedScenario* p) {
  p->runs = false;
  p->result.code = code;
  p->result.error = reason;
  // Every reason the plan leaves a scenario UNRESOLVED is its input's: the file, its name, its limits,
  // its workload (the run exits 2 for it).
  p->result.input_error = code == ResultCode::kUnresolved;
}

// Note [Host memory is part of the cap] (allocators/device_account.h): a backend that allocates what it
// measures in this host's memory cannot stand for a card bigger than the host; the kernel's OOM killer,
// not the cap, would end such a variant. `source` says where the cap came from, for the message.
bool CapFitsHost(const std::string& backend, const Limits& limits, const std::string& source, std::string* why) {
  const BackendTraits* traits = FindBackendTraits(backend);
  if (traits == nullptr || !traits->allocates_host_memory || limits.cap_bytes == Ledger::kUnlimited) return true;
  const HostMemory host = ReadHostMemory();
  if (host.total_bytes == 0 || limits.cap_bytes <= host.total_bytes) return true;
  *why = source + ": the cap of " + FormatBytes(limits.cap_bytes) + " is more than this host's " +
         FormatBytes(host.total_bytes) + " of memory, and the " + backend +
         " backend holds what it measures in host memory; use --backend meta (shapes only, any size), or a "
         "smaller --card or --cap";
  return false;
}

// The largest `parallel.world` among the scenario's variants (1 without `parallel`).
int64_t LargestWorld(const Scenario& scenario) {
  int64_t world = 1;
  for (const VariantSpec& v : scenario.variants) world = std::max(world, v.parallel.world);
  return world;
}

std::string CapSource(const RunOptions& options, const Scenario* scenario) {
  if (!options.cap.empty()) return "--cap " + options.cap;
  if (!options.card.empty()) return "--card " + options.card;
  if (scenario != nullptr && !scenario->cap.empty()) return scenario->file + ": its cap " + scenario->cap;
  return (scenario != nullptr ? scenario->file + ": its card " : std::string("the default card ")) +
         (scenario != nullptr && !scenario->card.empty() ? scenario->card : kDefaultCard);
}

}  // namespace

bool PlanRun(const RunOptions& options, const std::string& backend, const BackendCheck& available, RunPlan* plan,
             std::string* error, const RanksCheck& ranks) {
  std::vector<std::string> files;
  if (!FindScenarioFiles(PathsOrCatalog(options.paths), &files, error)) return false;
  if (!CheckKernelsFlag(options.kernels, backend, error)) return false;
  Limits probe;
  if (!ResolveLimits(options, kDefaultCard, &probe, error)) return false;  // bad flags fail before any work
  std::string alloc_conf;
  CachingAllocatorConfig config;
  if (!ResolveAllocConf(options.alloc_conf, &alloc_conf, &config, error)) return false;
  if ((!options.card.empty() || !options.cap.empty()) &&
      !CapFitsHost(backend, probe, CapSource(options, nullptr), error)) {
    return false;
  }
  *plan = RunPlan{};
  ShardTally& tally = plan->shard;
  if (!ResolveShard(options.shard, options.gtest_sharding, &tally.shard, error)) return false;

  std::map<std::string, std::string> file_of_name;
  const Filter filter = SplitFilter(options.filter);
  for (const std::string& file : files) {
    const bool named = std::find(options.paths.begin(), options.paths.end(), file) != options.paths.end();
    if (!named && IsResultsFile(file)) {
      plan->notes.push_back(file + ": a results file of `oomguard run --json`, not a scenario: left out");
      continue;
    }
    const bool in_shard = tally.shard.Takes(tally.run_files++);  // counts from 0, as Takes does
    PlannedScenario p;
    p.result.file = file;
    p.result.backend = backend;
    std::string load_error;
    const bool loaded = LoadScenarioFile(file, &p.scenario, &load_error);
    p.result.name = loaded ? p.scenario.name : Stem(file);
    p.result.summary = loaded ? p.scenario.summary : "";
    const bool name_selected = Matches(filter.scenario, p.result.name);
    const bool selected = name_selected && (!loaded || !filter.variant || SelectVariants(*filter.variant, &p.scenario));
    tally.selected_run_files += selected;
    if (!in_shard) {
      if (selected && loaded) file_of_name.emplace(p.scenario.name, file);  // the first user of a name keeps it
      continue;
    }
    ++tally.files;
    Limits limits;
    std::string why;
    if (!selected) {
      NotRun(ResultCode::kSkipped,
             "not selected by --filter '" + options.filter + "'" +
                 (name_selected ? " (no variant matches '" + *filter.variant +
                                      "'; its variants: " + Joined(p.scenario.left_out) + ")"
                                : ""),
             &p);
    } else if (!loaded) {
      NotRun(ResultCode::kUnresolved, load_error, &p);
    } else if (auto [it, fresh] = file_of_name.emplace(p.scenario.name, file); !fresh) {
      NotRun(ResultCode::kUnresolved,
             file + ": scenario name '" + p.scenario.name + "' is already used by " + it->second, &p);
    } else {
      if (!ScenarioLimits(options, p.scenario, &limits, &why)) {
        NotRun(ResultCode::kUnresolved, why, &p);

      } else if (!WorkloadsRegistered(p.scenario, &why)) {
        NotRun(ResultCode::kUnresolved, file + ": " + why, &p);
      } else if (const auto& listed = p.scenario.backends;
                 std::find(listed.begin(), listed.end(), backend) == listed.end()) {
        NotRun(ResultCode::kUnsupported,
               "runs on " + Joined(listed) + ", not " + backend + " (run it with --backend " + listed.front() + ")",
               &p);
      } else if (ranks && !ranks(backend, LargestWorld(p.scenario), &why)) {
        NotRun(ResultCode::kUnsupported, why, &p);
      } else if (!available(backend, &why)) {
        NotRun(ResultCode::kUnsupported, why, &p);
      } else if (!CapFitsHost(backend, limits, CapSource(options, &p.scenario), &why)) {
        NotRun(ResultCode::kUnresolved, why, &p);
      } else {
        p.runs = true;
      }
      p.result.card = limits.card;
      p.result.cap_bytes = limits.cap_bytes;
    }
    plan->scenarios.push_back(std::move(p));
  }
  return true;
}

}  // namespace oomguard
