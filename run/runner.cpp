#include "run/runner.h"

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <iostream>
#include <map>

#include "backends/backend.h"
#include "backends/version_info.h"
#include "base/atomic_file.h"
#include "base/byte_size.h"
#include "base/child_process.h"
#include "base/exit_codes.h"
#include "base/files.h"
#include "base/host_memory.h"
#include "base/scratch_folder.h"
#include "baselines/baseline_diff.h"
#include "model/measurement_json.h"
#include "run/child_protocol.h"
#include "run/measure_child.h"
#include "run/output_collisions.h"
#include "run/plan.h"
#include "run/rank_children.h"
#include "run/snapshot_keeper.h"
#include "verdict/memory_estimate.h"
#include "verdict/verdict.h"

namespace oomguard {
namespace {

// What a child left behind; "" when it left nothing (the caller reports that).
std::string ReadFileOrEmpty(const std::string& path) {
  std::string content, ignored;
  return ReadFile(path, &content, &ignored) ? content : "";
}

// The measurement a child that exited 0 wrote, or false with why it cannot be read (too large for
// the input limit, not JSON, not a measurement): a variant never ends UNRESOLVED without a reason.
bool ReadMeasurement(const std::string& path, VariantMeasurement* m, std::string* error) {
  std::string text;
  if (!ReadFile(path, &text, error)) return false;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    *error = path + ": not JSON";
    return false;
  }
  if (!MeasurementFromJson(j, m, error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

std::string Tail(const std::string& text, size_t max_chars) {
  return text.size() <= max_chars ? text : "..." + text.substr(text.size() - max_chars);
}

// The baseline evidence of a scenario whose variants all reported or failed. Under
// --update-baselines regressions are reported as data but do not fail: the point of the run is to
// record the new numbers.
void CompareWithBaselines(const RunOptions& options, const ScenarioResult& header, ScenarioEvidence* evidence) {
  const std::string dir = BaselineDirectory(options.baselines_dir, header.file);
  const std::string path = BaselinePath(dir, header.name);
  BaselineFile file;
  std::string error;
  if (!LoadScenarioBaseline(dir, header.name, &file, &error)) {
    evidence->baseline_error = "corrupt baseline: " + error;
    return;
  }
  for (VariantEvidence& e : evidence->variants) {
    // A variant that ended otherwise than expected (an OOM, an error) stopped part-way: its numbers
    // are not comparable with a whole run's, so it is neither "improved" nor a regression.
    if (!e.measurement || e.measurement->outcome != e.expectation.outcome) continue;
    e.baseline = CompareWithBaseline(file, path, *e.measurement);
    if (!options.update_baselines) e.baseline_failures = BaselineFailures(e.baseline, options.strict);
  }
}

// Note [Blame the OOM killer with evidence]
// A child ended by a SIGKILL the runner did not send (no timeout) was once always blamed on the
// kernel's OOM killer, with advice to shrink the cap, even after a user's `kill -9`. Now the OOM killer
// is named only with evidence: the cgroups' oom_kill count rose while the children ran (Note [Which
// cgroup], base/host_memory.h), or the child's peak resident memory reached 90% of what the host had
// available when the run began. Otherwise the kill is reported as from outside, without memory advice.
std::string KilledFromOutside(int64_t oom_kills_before, const HostMemory& at_start, int64_t child_max_rss,
                              int64_t cap_bytes) {
  const int64_t now = CgroupOomKills();
  const HostMemory host = ReadHostMemory();
  const std::string memory = "; the cap was " + (cap_bytes == Ledger::kUnlimited ? "none" : FormatBytes(cap_bytes)) +
                             ", and this host has " + FormatBytes(host.total_bytes) + " of memory (" +
                             FormatBytes(host.available_bytes) +
                             " available now): use --backend meta (shapes only, any size) or a smaller --card or --cap";
  if (oom_kills_before >= 0 && now > oom_kills_before) return ": the kernel's OOM killer ended it" + memory;
  if (at_start.available_bytes > 0 && child_max_rss >= at_start.available_bytes / 10 * 9) {
    return ": killed from outside oomguard, most likely by the kernel's OOM killer (it held " +
           FormatBytes(child_max_rss) + " of the " + FormatBytes(at_start.available_bytes) +
           " available when the run began)" + memory;
  }
  return ": killed by SIGKILL from outside oomguard (no sign of the kernel's OOM killer: it held at most " +
         FormatBytes(child_max_rss) + ", and no OOM kill was counted)";
}

// Note [Warm children]
// A variant runs in a process of its own, so that a crash, a hang, an OOM kill or a leak ends that
// variant alone, and no variant sees another's memory or state. Spawning `oomguard __measure` gave
// that at the price of a LibTorch start-up per variant (0.5 s and 460 MiB on the 2-core machine) and of
// parsing its scenario file again. On cpu and meta the runner instead forks itself: the child is a
// copy of a process that has loaded LibTorch and registered every kernel, parsed and resolved the
// variant, and measured nothing (the runner never runs a tensor op), and it calls the measurement
// directly (MeasureForkedVariant) with no exec. Its isolation is the spawned child's: its own process
// and memory, the same timeout, exit codes, signals and stderr file, PR_SET_PDEATHSIG. A spawned child
// (cuda) is given its variant resolved, as a scenario of that variant alone (Note [Parse once],
// scenario/variant_resolution.h).
// It forks only while the runner has one thread: a lock another thread held (an intra-op pool, a CUDA
// driver thread) would stay held in the child. Otherwise (a test binary that ran tensor ops, cuda,
// OOMGUARD_SPAWN_CHILDREN=1) each variant is spawned as before; the results say which
// (RunResults::children) and why.

// How this run's children start, and why when not forked.
std::string ChildrenStart(const RunOptions& options, const BackendDriver& driver, std::string* why) {
  if (options.spawn_children) {
    *why = "OOMGUARD_SPAWN_CHILDREN is set";
  } else if (!driver.traits().forks_warm) {
    *why = "a " + driver.name() + " child needs a fresh process (CUDA cannot cross a fork)";
  } else if (!ThisProcessHasOneThread()) {
    *why = "this process runs more than one thread, so a fork could inherit a held lock";
  } else {
    return "forked";
  }
  return "spawned";
}

// A scenario that runs, while its children do.
struct Running {
  PlannedScenario* planned = nullptr;
  ScenarioEvidence evidence;
  size_t variants_left = 0;
  double duration_ms = 0;
};

struct Job {
  size_t running;  // index into the running list
  size_t variant;
  std::string out_path;
  std::string stderr_path;
  int64_t rank = -1;  // one of the variant's real ranks (run/rank_children.h); -1: the variant's only child
};

// What a variant's child left: its measurement, or how it ended (without one).
void TakeChildExit(const Job& job, const ChildExit& exit, const RunOptions& options, int64_t oom_kills_before,
                   const HostMemory& host_at_start, int64_t cap_bytes, VariantEvidence* e) {
  VariantMeasurement m;
  std::string read_error;
  // A rank that failed wrote its measurement too (Note [A failing rank ends the variant]).
  const bool wrote = exit.exit_code == 0 || (job.rank >= 0 && exit.exit_code == kExitRankFailed);
  const bool exited_ok = wrote && !exit.timed_out && exit.signal == 0 && exit.spawn_error.empty();
  if (exited_ok && ReadMeasurement(job.out_path, &m, &read_error)) {
    e->measurement = std::move(m);
    return;
  }
  e->timed_out = exit.timed_out;
  e->input_error = !exit.timed_out && exit.signal == 0 && exit.exit_code == kExitUsage;
  e->exit = DescribeExit(exit, options.timeout_seconds);
  if (exited_ok) e->exit += ", but its measurement cannot be read: " + read_error;
  if (exit.exit_code == kExitOutputFailed && exit.signal == 0 && !exit.timed_out)
    e->exit += ": it could not write its measurement (its stderr says why)";
  if (exit.signal == SIGKILL && !exit.timed_out && !exit.ended_with_gang)
    e->exit += KilledFromOutside(oom_kills_before, host_at_start, exit.max_rss_bytes, cap_bytes);
  e->diagnostics = Tail(ReadFileOrEmpty(job.stderr_path), 2000);
}

}  // namespace

bool RunScenarios(const RunOptions& options, const std::string& self_exe, const ScenarioDone& on_done,
                  RunResults* report, std::string* error) {
  const auto start = std::chrono::steady_clock::now();
  const BackendDriver& driver = GetBackend(ResolveBackend(options.backend));
  const std::string backend = driver.name();
  RunPlan run_plan;
  const BackendCheck available = [](const std::string& name, std::string* why) {
    return GetBackend(BackendNamed(name)).Available(why);
  };
  // Note [Ranks need a GPU each] (run/rank_children.h); a build without the backend says so as it is
  // unavailable.
  const RanksCheck ranks = [](const std::string& name, int64_t world, std::string* why) {
    const BackendDriver& d = GetBackend(BackendNamed(name));
    if (!d.compiled_in() || !d.traits().device_per_rank || world <= 1) return true;
    *why = RanksUnsupported(d.traits(), world, d.DeviceCount());
    return why->empty();
  };
  if (!PlanRun(options, backend, available, &run_plan, error, ranks)) return false;
  if (!CheckOutputsSpareInputs(options.outputs, run_plan, options.baselines_dir, error)) return false;
  std::vector<PlannedScenario>& plan = run_plan.scenarios;
  if (!options.snapshot_dir.empty() && !MakeDirectories(options.snapshot_dir, error)) {
    *error = "--snapshot-dir " + options.snapshot_dir + ": " + *error;
    return false;
  }
  report->backend = backend;
  report->shard = run_plan.shard;
  report->notes = run_plan.notes;
  const VersionInfo versions = CollectVersionInfo();
  report->oomguard_version = versions.oomguard;
  report->libtorch_version = versions.libtorch;
  // Note [One cuda variant at a time]: processes sharing a GPU share its memory, so a variant could run
  // out of memory because a neighbour holds it, not because of its cap.
  report->jobs = driver.traits().shares_device ? 1 : options.jobs;
  report->iterations = options.iterations;
  report->compared_with_baselines = true;
  report->strict = options.strict;
  report->updating_baselines = options.update_baselines;

  ScratchFolder scratch;  // Note [Scratch folders are locked], base/scratch_folder.h
  if (!scratch.Create("oomguard-run", error)) return false;
  const std::string& tmp_dir = scratch.path();

  report->children = ChildrenStart(options, driver, &report->children_reason);
  const bool fork_children = report->children == "forked";

  std::vector<Running> running;
  std::vector<Job> jobs;
  std::vector<ChildSpec> specs;
  std::map<std::pair<size_t, size_t>, std::vector<RankEnd>> rank_ends;  // (running, variant): its ranks' ends
  for (PlannedScenario& p : plan) {
    if (!p.runs) continue;
    Running r;
    r.planned = &p;
    r.variants_left = p.scenario.variants.size();
    for (size_t v = 0; v < p.scenario.variants.size(); ++v) {
      const VariantSpec& variant = p.scenario.variants[v];
      const std::string& name = variant.name;
      const std::string base = tmp_dir + "/" + std::to_string(specs.size());
      MeasureRequest request = MeasureRequestFor(options, p.result.file, name, backend, tmp_dir, base + ".json");
      if (!fork_children) {
        // Note [Parse once]: the child loads its variant alone. Should the scratch file not be
        // written (a full /tmp), it loads the scenario file instead, as a child run by hand does.
        std::string ignored;
        if (!variant.document.empty() && WriteFileAtomically(base + ".variant.json", variant.document, &ignored)) {
          request.variant_file = base + ".variant.json";
        }
      }
      // Note [Real ranks on cpu]: N children of one gang, else the variant's one child.
      const bool ranks = RunsRealRanks(driver.traits(), variant);
      const std::vector<MeasureRequest> requests =
          ranks ? RankRequests(request, base, variant.parallel.world, options.timeout_seconds)
                : std::vector<MeasureRequest>{request};
      const int64_t gang = ranks ? static_cast<int64_t>(specs.size()) : -1;
      for (size_t k = 0; k < requests.size(); ++k) {
        const MeasureRequest& own = requests[k];
        const std::string files = ranks ? base + ".rank" + std::to_string(k) : base;
        ChildSpec spec;
        if (fork_children) {
          const Scenario* scenario = &p.scenario;
          spec.body = [scenario, v, own] {
            return MeasureForkedVariant(*scenario, scenario->variants[v], own, std::cerr);
          };
        } else {
          spec.argv = ChildArgv(self_exe, own);
        }
        spec.stdout_path = files + ".out";
        spec.stderr_path = files + ".err";
        spec.timeout_seconds = options.timeout_seconds;
        spec.gang = gang;
        specs.push_back(spec);
        jobs.push_back({running.size(), v, own.out_path, spec.stderr_path, ranks ? static_cast<int64_t>(k) : -1});
      }
      VariantEvidence e;
      e.name = name;
      if (auto it = p.scenario.expectations.find(name); it != p.scenario.expectations.end()) e.expectation = it->second;
      r.evidence.variants.push_back(std::move(e));
    }
    running.push_back(std::move(r));
  }

  for (const PlannedScenario& p : plan) {
    if (!p.runs && p.result.code != ResultCode::kSkipped && on_done) on_done(p.result);
  }
  const int64_t oom_kills_before = CgroupOomKills();
  const HostMemory host_at_start = ReadHostMemory();
  const int stopped_by = RunChildren(specs, report->jobs, [&](size_t index, const ChildExit& exit) {
    const Job& job = jobs[index];
    Running& r = running[job.running];
    VariantEvidence& e = r.evidence.variants[job.variant];
    const int64_t cap_bytes = r.planned->result.cap_bytes;
    if (job.rank < 0) {
      r.duration_ms += exit.wall_ms;
      TakeChildExit(job, exit, options, oom_kills_before, host_at_start, cap_bytes, &e);
    } else {  // one of the variant's ranks: the variant is judged once all have ended
      const ParallelSpec& parallel = r.planned->scenario.variants[job.variant].parallel;
      std::vector<RankEnd>& ends = rank_ends[{job.running, job.variant}];
      RankEnd end{job.rank, {}, exit.ended_with_gang};
      TakeChildExit(job, exit, options, oom_kills_before, host_at_start, cap_bytes, &end.evidence);
      ends.push_back(std::move(end));
      if (static_cast<int64_t>(ends.size()) < parallel.world) return;
      r.duration_ms += exit.wall_ms;  // the ranks ran at once, as one job: the last to end is its time
      MergeRankEvidence(ends, parallel.world, parallel.rank, &e);
    }
    if (--r.variants_left > 0) return;
    PlannedScenario& p = *r.planned;
    CompareWithBaselines(options, p.result, &r.evidence);
    p.result = JudgeScenario(p.scenario, std::move(p.result), r.evidence);
    p.result.duration_ms = r.duration_ms;
    for (size_t v = 0; v < p.result.variants.size(); ++v) {
      VariantResult& result = p.result.variants[v];
      if (result.measurement) result.estimate = EstimateMemory(p.scenario, p.scenario.variants[v], *result.measurement);
    }
    if (!options.snapshot_dir.empty()) KeepSnapshots(options.snapshot_dir, options.snapshot_all, &p.result);
    if (on_done) on_done(p.result);
  });
  scratch.Remove();
  if (stopped_by != 0) RaiseDefault(stopped_by);  // interrupted: nothing is reported, nothing left behind

  for (PlannedScenario& p : plan) {
    (p.result.code == ResultCode::kSkipped && !p.runs ? report->skipped : report->scenarios)
        .push_back(std::move(p.result));
  }
  report->duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return true;
}

}  // namespace oomguard
