#include "run/runner.h"

#include <dirent.h>
#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <ATen/Parallel.h>

#include "backends/backend.h"
#include "baselines/baseline_diff.h"
#include "base/child_process.h"
#include "model/measurement_json.h"
#include "scenario/scenario_loader.h"
#include "run/snapshot_keeper.h"
#include "verdict/memory_estimate.h"
#include "verdict/verdict.h"
#include "backends/version_info.h"
#include "workload/workload.h"
#include "base/atomic_file.h"
#include "base/files.h"
#include "scenario/catalog.h"

namespace oomguard {
namespace {

// What a child left behind; "" when it left nothing (the caller reports that).
std::string ReadFileOrEmpty(const std::string& path) {
  std::string content, ignored;
  return ReadFile(path, &content, &ignored) ? content : "";
}

// A results file written by `oomguard run --json` into a folder that is also scanned for scenarios.
bool IsResultsFile(const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(ReadFileOrEmpty(path), nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("schema_version") && j.contains("scenarios");
}

std::string Tail(const std::string& text, size_t max_chars) {
  return text.size() <= max_chars ? text : "..." + text.substr(text.size() - max_chars);
}

// --card/--cap from the command line win; else the scenario's own default; else kDefaultCard.
bool LimitsFor(const RunOptions& options, const Scenario& scenario, Limits* limits, std::string* error) {
  RunOptions effective = options;
  if (options.card.empty() && options.cap.empty()) {
    effective.card = scenario.card;
    effective.cap = scenario.cap;
  }
  return ResolveLimits(effective, kDefaultCard, limits, error);
}

// Compares a judged scenario with its baseline file. Under --update-baselines regressions are
// reported as data but do not fail: the point of the run is to record the new numbers.
void CompareScenario(const RunOptions& options, ScenarioResult* result) {
  const std::string path = BaselinePath(BaselineDirectory(options.baselines_dir, result->file), result->name);
  BaselineFile file;
  std::string error;
  if (!LoadBaselineFile(path, &file, &error)) {
    result->code = ResultCode::kUnresolved;
    result->error = "corrupt baseline: " + error;
    return;
  }
  if (options.update_baselines) {
    for (VariantResult& v : result->variants) {
      if (v.measurement) v.baseline = CompareWithBaseline(file, path, *v.measurement);
    }
    return;
  }
  ApplyBaselines(file, path, options.strict, result);
}

struct PendingScenario {
  Scenario scenario;
  ScenarioResult result;
  size_t variants_left = 0;
};

struct Job {
  size_t scenario;  // index into the pending list
  size_t variant;
  std::string out_path;
};

}  // namespace

bool RunScenarios(const RunOptions& options, const std::string& self_exe, const ScenarioDone& on_done,
                  RunResults* report, std::string* error) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> files;
  const std::vector<std::string> paths = PathsOrCatalog(options.paths);
  if (!FindScenarioFiles(paths, &files, error)) return false;
  Limits probe;
  if (!ResolveLimits(options, kDefaultCard, &probe, error)) return false;  // bad flags fail before any work
  if (!options.snapshot_dir.empty() && !MakeDirectories(options.snapshot_dir, error)) {
    *error = "--snapshot-dir " + options.snapshot_dir + ": " + *error;
    return false;
  }

  const BackendDriver& driver = GetBackend(ResolveBackend(options.backend));
  const std::string backend = driver.name();
  report->backend = backend;
  const VersionInfo versions = CollectVersionInfo();
  report->oomguard_version = versions.oomguard;
  report->libtorch_version = versions.libtorch;
  // Note [One cuda variant at a time]: processes sharing a GPU share its memory, so a variant could run
  // out of memory because a neighbour holds it, not because of its cap.
  report->jobs = driver.traits().shares_device ? 1 : options.jobs;
  report->iterations = options.iterations;
  report->compared_with_baselines = true;
  report->strict = options.strict;

  std::vector<PendingScenario> pending;
  std::vector<size_t> finished;  // scenarios complete before any child runs (unresolved, unsupported)
  std::map<std::string, std::string> file_of_name;
  for (const std::string& file : files) {
    const bool named = std::find(options.paths.begin(), options.paths.end(), file) != options.paths.end();
    if (!named && IsResultsFile(file)) continue;  // found in a folder: oomguard's own output, not a scenario
    PendingScenario p;
    p.result.file = file;
    p.result.backend = backend;
    std::string load_error;
    if (!LoadScenarioFile(file, &p.scenario, &load_error)) {
      p.result.name = Stem(file);
      if (fnmatch(options.filter.c_str(), p.result.name.c_str(), 0) != 0) continue;
      p.result.code = ResultCode::kUnresolved;
      p.result.error = load_error;
      finished.push_back(pending.size());
      pending.push_back(std::move(p));
      continue;
    }
    p.result.name = p.scenario.name;
    p.result.summary = p.scenario.summary;
    if (fnmatch(options.filter.c_str(), p.scenario.name.c_str(), 0) != 0) continue;
    if (auto [it, fresh] = file_of_name.emplace(p.scenario.name, file); !fresh) {
      p.result.code = ResultCode::kUnresolved;
      p.result.error = file + ": scenario name '" + p.scenario.name + "' is already used by " + it->second;
      finished.push_back(pending.size());
      pending.push_back(std::move(p));
      continue;
    }
    Limits limits;
    std::string limits_error;
    if (!LimitsFor(options, p.scenario, &limits, &limits_error)) {
      p.result.code = ResultCode::kUnresolved;
      p.result.error = limits_error;
    } else if (std::find(p.scenario.backends.begin(), p.scenario.backends.end(), backend) == p.scenario.backends.end()) {
      p.result.code = ResultCode::kUnsupported;
      p.result.error = "runs on " + [&] {
        std::string s;
        for (const std::string& b : p.scenario.backends) s += (s.empty() ? "" : ", ") + b;
        return s;
      }() + ", not " + backend + " (run it with --backend " + p.scenario.backends.front() + ")";
    } else if (std::string why; !driver.Available(&why)) {
      p.result.code = ResultCode::kUnsupported;
      p.result.error = why;
    }
    p.result.card = limits.card;
    p.result.cap_bytes = limits.cap_bytes;
    if (!p.result.error.empty()) finished.push_back(pending.size());
    pending.push_back(std::move(p));
  }

  char dir_template[] = "/tmp/oomguard-run-XXXXXX";
  const char* tmp = mkdtemp(dir_template);
  if (tmp == nullptr) {
    *error = "cannot create a temporary folder in /tmp";
    return false;
  }
  const std::string tmp_dir = tmp;

  std::vector<Job> jobs;
  std::vector<ChildSpec> specs;
  for (size_t s = 0; s < pending.size(); ++s) {
    PendingScenario& p = pending[s];
    if (!p.result.error.empty()) continue;
    p.variants_left = p.scenario.variants.size();
    for (size_t v = 0; v < p.scenario.variants.size(); ++v) {
      const std::string base = tmp_dir + "/" + std::to_string(specs.size());
      ChildSpec spec;
      spec.argv = {self_exe, "__measure", "--scenario", p.result.file, "--variant", p.scenario.variants[v].name,
                   "--backend", backend, "--out", base + ".json"};
      if (!options.card.empty()) spec.argv.insert(spec.argv.end(), {"--card", options.card});
      if (!options.cap.empty()) spec.argv.insert(spec.argv.end(), {"--cap", options.cap});
      if (!options.context.empty()) spec.argv.insert(spec.argv.end(), {"--context", options.context});
      for (const std::string& inject : options.inject) spec.argv.insert(spec.argv.end(), {"--inject", inject});
      if (options.iterations > 0) spec.argv.insert(spec.argv.end(), {"--iterations", std::to_string(options.iterations)});
      // Every child records into the scratch folder; KeepSnapshots picks what to keep once judged.
      if (!options.snapshot_dir.empty()) spec.argv.insert(spec.argv.end(), {"--snapshot-dir", tmp_dir, "--snapshot-all"});
      if (options.model_cuda) spec.argv.push_back("--model-cuda");
      spec.stdout_path = base + ".out";
      spec.stderr_path = base + ".err";
      spec.timeout_seconds = options.timeout_seconds;
      specs.push_back(spec);
      jobs.push_back({s, v, base + ".json"});
      p.result.variants.emplace_back();
      p.result.variants.back().name = p.scenario.variants[v].name;
    }
  }

  for (size_t s : finished) {
    if (on_done) on_done(pending[s].result);
  }
  RunChildren(specs, report->jobs, [&](size_t index, const ChildExit& exit) {
    const Job& job = jobs[index];
    PendingScenario& p = pending[job.scenario];
    VariantResult& slot = p.result.variants[job.variant];
    const VariantExpectation expectation = p.scenario.expectations.count(slot.name)
                                               ? p.scenario.expectations.at(slot.name)
                                               : VariantExpectation{};
    VariantMeasurement m;
    std::string parse_error = "no measurement written";
    const bool reported = exit.exit_code == 0 && !exit.timed_out && exit.signal == 0 &&
                          MeasurementFromJson(nlohmann::json::parse(ReadFileOrEmpty(job.out_path), nullptr, false), &m,
                                              &parse_error);
    if (reported) {
      slot = JudgeVariant(slot.name, expectation, m);
      slot.estimate = EstimateMemory(p.scenario, p.scenario.variants[job.variant], m);
    } else {
      slot.code = exit.timed_out ? ResultCode::kTimeout : ResultCode::kUnresolved;
      slot.expected_outcome = expectation.outcome;
      slot.reasons.push_back(DescribeExit(exit, options.timeout_seconds));
      slot.diagnostics = Tail(ReadFileOrEmpty(specs[index].stderr_path), 2000);
    }
    p.result.duration_ms += exit.wall_ms;
    if (--p.variants_left == 0) {
      JudgeScenario(p.scenario, &p.result);
      CompareScenario(options, &p.result);
      if (!options.snapshot_dir.empty()) KeepSnapshots(options.snapshot_dir, options.snapshot_all, &p.result);
      if (on_done) on_done(p.result);
    }
  });
  RemoveFolderOfFiles(tmp_dir);

  for (PendingScenario& p : pending) report->scenarios.push_back(std::move(p.result));
  report->duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return true;
}

int MeasureInChild(const RunOptions& options, const std::string& scenario_file, const std::string& variant,
                   const std::string& out_path, std::ostream& err) {
  // One intra-op thread: some kernels allocate per-thread buffers, and exact bytes must not depend on
  // the machine's core count.
  at::set_num_threads(1);
  Scenario scenario;
  std::string error;
  if (!LoadScenarioFile(scenario_file, &scenario, &error)) {
    err << error << "\n";
    return 2;
  }
  const VariantSpec* spec = nullptr;
  for (const VariantSpec& v : scenario.variants) {
    if (v.name == variant) spec = &v;
  }
  Limits limits;
  if (spec == nullptr || !LimitsFor(options, scenario, &limits, &error)) {
    err << (spec == nullptr ? "no variant '" + variant + "' in " + scenario_file : error) << "\n";
    return 2;
  }
  MeasureOptions measure;
  measure.backend = ResolveBackend(options.backend);
  measure.limits = limits;
  measure.iterations = options.iterations;
  measure.model_cuda = options.model_cuda;
  if (!options.snapshot_dir.empty()) {
    measure.snapshot.path =
        SnapshotPath(options.snapshot_dir, scenario.name, variant, std::string(BackendName(measure.backend)));
    measure.snapshot.always = options.snapshot_all;
    measure.snapshot.source = {scenario_file, scenario.name, variant, std::string(BackendName(measure.backend)),
                               limits.cap_bytes};
  }
  const VariantMeasurement m = MeasureVariant(*spec, measure);
  std::ofstream out(out_path);
  out << MeasurementToJson(m).dump();
  return out.good() ? 0 : 2;
}

}  // namespace oomguard
