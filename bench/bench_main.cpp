// Runs the benchmarks, then prints the tracking/default ratios each measured in this run
// (Note [Paired measurement], bench_util.h) against oomguard's goals. Exit code 1 when a goal is missed.
#include <cstdio>
#include <map>
#include <string>

#include "bench/bench_util.h"

namespace {

struct Goal {
  const char* label;
  const char* benchmark;
  double target;            // the most candidate / baseline may be; 0: reported, no target
  double max_candidate_ms;  // the longest the candidate may take; 0: no target
};

constexpr Goal kGoals[] = {
    {"alloc+free 64 B", "BM_AllocFree/64", 0, 0},
    {"alloc+free 4 KiB", "BM_AllocFree/4096", 1.10, 0},
    {"alloc+free 1 MiB", "BM_AllocFree/1048576", 0, 0},
    // The same with the caching allocator's model deciding each request, as in every cpu run now.
    {"verdict 4 KiB", "BM_AllocFreeUnderTheVerdict/4096", 0, 0},
    {"MLP training step", "BM_TrainingStep", 1.02, 0},
    // Baseline: the same step in plain LibTorch code on meta; candidate: oomguard's MeasureVariant.
    {"7B step on meta", "BM_MetaStep/llm_7b", 0, 100},
    {"70B step on meta", "BM_MetaStep/llm_70b", 0, 1000},
};

// Keeps each benchmark's paired counters while the console reporter prints as usual.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      const std::string& args = run.run_name.args;
      auto ratio = run.counters.find("ratio");
      if (ratio != run.counters.end()) {
        results_[run.run_name.function_name + (args.empty() ? "" : "/" + args)] = {
            run.counters.at("baseline_ns").value, run.counters.at("candidate_ns").value, ratio->second.value};
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  struct Result {
    double baseline_ns, tracking_ns, ratio;
  };
  std::map<std::string, Result> results_;
};

std::string Duration(double ns) {
  char buf[32];
  if (ns >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f ns", ns);
  }
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf(
      "\ncandidate (tracking, or the harness) / baseline (default, or plain LibTorch), median of paired "
      "rounds measured in this run:\n");
  int missed = 0;
  for (const Goal& goal : kGoals) {
    auto it = reporter.results_.find(goal.benchmark);
    if (it == reporter.results_.end()) continue;  // filtered out
    const auto& r = it->second;
    std::printf("  %-18s baseline %10s  candidate %10s  ratio %.3fx", goal.label, Duration(r.baseline_ns).c_str(),
                Duration(r.tracking_ns).c_str(), r.ratio);
    if (goal.target > 0) {
      const bool ok = r.ratio <= goal.target;
      missed += !ok;
      std::printf("  (target <= %.2fx: %s)", goal.target, ok ? "ok" : "MISSED");
    }
    if (goal.max_candidate_ms > 0) {
      const bool ok = r.tracking_ns <= goal.max_candidate_ms * 1e6;
      missed += !ok;
      std::printf("  (target <= %.0f ms: %s)", goal.max_candidate_ms, ok ? "ok" : "MISSED");
    }
    std::printf("\n");
  }
  return missed == 0 ? 0 : 1;
}
