// Shared pieces of oomguard's benchmarks: switching c10's CPU allocator, and paired measurement.
//
// Note [Paired measurement]: on a shared 2-core machine two benchmarks run one after the other differ
// by 10-15% from drift alone (measured: the same MLP step took 7.6-12 ms across runs), which swamps a
// 2% goal. So each benchmark alternates the two sides in short rounds, in alternating order, inside one
// loop, and reports the median of the per-round ratios: drift hits both sides of a round alike.
#pragma once

#include <benchmark/benchmark.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace oomguard::bench {

// Registers `allocator` as c10's CPU allocator until the next SetCpuAllocator. Each CPU DataPtr
// carries its own deleter, so tensors may outlive a switch.
inline void SetCpuAllocator(c10::Allocator* allocator) { c10::SetCPUAllocator(allocator, 200); }

inline double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Collects per-round timings of a baseline and a candidate and publishes them as counters:
// baseline_ns and candidate_ns per operation (medians) and ratio (median of per-round ratios).
class PairedRounds {
 public:
  template <typename Baseline, typename Candidate>
  void Round(Baseline&& baseline, Candidate&& candidate, int ops_per_round) {
    const bool candidate_first = (rounds_++ % 2) == 1;
    double b = 0, c = 0;
    if (candidate_first) c = Time(candidate);
    b = Time(baseline);
    if (!candidate_first) c = Time(candidate);
    baseline_ns_.push_back(b / ops_per_round);
    candidate_ns_.push_back(c / ops_per_round);
    ratios_.push_back(c / b);
  }

  void Publish(benchmark::State& state) const {
    if (ratios_.empty()) return;
    state.counters["baseline_ns"] = Median(baseline_ns_);
    state.counters["candidate_ns"] = Median(candidate_ns_);
    state.counters["ratio"] = Median(ratios_);
  }

 private:
  template <typename F>
  static double Time(F& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  }

  int rounds_ = 0;
  std::vector<double> baseline_ns_, candidate_ns_, ratios_;
};

}  // namespace oomguard::bench
