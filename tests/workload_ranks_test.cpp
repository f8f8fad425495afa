// A registered workload's own distributed code (Note [A workload's own ranks], workload/user_workload_run.h):
// ctx.Rank(), ctx.WorldSize() and ctx.ProcessGroup(), on real Gloo ranks on cpu and one simulated rank on
// meta. The workload is the example's (examples/libtorch-training/data_parallel.cpp), linked in so that
// the runner knows it; the ranks' children are the example's own program.
#include <gtest/gtest.h>
#include <oomguard/measure.h>
#include <oomguard/workload.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "run/runner.h"
#include "tests/rank_expectations.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

using nlohmann::json;

// The example's classifier at hidden 512: 784 x 512 + 512 (first linear) + 2 x 512 (layer norm) +
// 512 x 10 + 10 (second linear) floats.
constexpr int64_t kParameterBytes = (784 * 512 + 512 + 2 * 512 + 512 * 10 + 10) * 4;

const VariantResult& VariantNamed(const RunResults& report, const std::string& name) {
  EXPECT_EQ(report.scenarios.size(), 1u);
  EXPECT_EQ(report.scenarios.at(0).error, "");
  for (const VariantResult& v : report.scenarios.at(0).variants) {
    if (v.name == name && v.measurement) return v;
  }
  ADD_FAILURE() << "no measured variant " << name;
  return report.scenarios.at(0).variants.at(0);
}

int64_t PeakOfPhase(const VariantMeasurement& m, const std::string& phase) {
  for (const PhasePeak& p : m.ledger.phase_peaks) {
    if (p.phase == phase) return p.peak_bytes;
  }
  ADD_FAILURE() << "no phase " << phase;
  return -1;
}

RunResults RunOn(const std::string& file, const std::string& backend, const std::vector<std::string>& inject = {}) {
  RunOptions options;
  options.paths = {file};
  options.backend = backend;
  options.inject = inject;
  options.jobs = 2;
  options.timeout_seconds = 120;
  RunResults report;
  std::string error;
  EXPECT_TRUE(RunScenarios(options, EXAMPLE_EXE, nullptr, &report, &error)) << error;
  return report;
}

// The example's scenario at world 2, each variant once per rank (NAME_rR has parallel.rank R), and
// "alone" (no parallel: rank 0 of 1, its own gradients); its expectations and checks left out.
std::string ExampleAtWorldTwo() {
  std::ifstream in(std::string(OOMGUARD_SOURCE_DIR) +
                   "/examples/libtorch-training/scenarios/classifier-data-parallel.json");
  std::stringstream text;
  text << in.rdbuf();
  json scenario = json::parse(text.str(), nullptr, true, /*ignore_comments=*/true);
  scenario.erase("expect");
  scenario.erase("checks");
  scenario["variants"] = {{"alone", {{"parallel", nullptr}}}};
  for (const std::string name : {"per_gradient", "flat_bucket"}) {
    for (int64_t rank = 0; rank < 2; ++rank) {
      scenario["variants"][name + "_r" + std::to_string(rank)] = {{"knobs", {{"flat_bucket", name == "flat_bucket"}}},
                                                                  {"parallel", {{"rank", rank}}}};
    }
  }
  return scenario.dump(2);
}

TEST(WorkloadRanks, CpuRealRanksEqualMetasSimulatedRanksToTheByteAndAverageTheGradients) {
  testing::ScratchFolder folder("workload-ranks");
  const std::string file = folder.Write("world2.json", ExampleAtWorldTwo());
  const RunResults cpu = RunOn(file, "cpu");  // each variant runs both ranks, a child each
  const RunResults meta = RunOn(file, "meta");
  for (const std::string name : {"per_gradient", "flat_bucket"}) {
    for (int64_t rank = 0; rank < 2; ++rank) {
      const std::string variant = name + "_r" + std::to_string(rank);
      const VariantMeasurement& real = *VariantNamed(cpu, variant).measurement;
      const VariantMeasurement& simulated = *VariantNamed(meta, variant).measurement;
      ASSERT_EQ(real.ranks.size(), 2u) << variant;
      // Every rank of every cpu run against meta's rank of that number.
      for (int64_t r = 0; r < 2; ++r) {
        const VariantMeasurement& meta_rank = *VariantNamed(meta, name + "_r" + std::to_string(r)).measurement;
        testing::ExpectRankEqualsMeta(real.ranks[r], meta_rank, variant + ": rank " + std::to_string(r) + " of 2");
      }
      ASSERT_TRUE(simulated.parallel.has_value());
      EXPECT_EQ(simulated.parallel->world, 2);
      EXPECT_EQ(simulated.parallel->rank, rank);
      EXPECT_EQ(simulated.parallel->strategy, "own");
      // Data parallelism replicates: every rank holds every parameter, gradient and Adam moment.
      EXPECT_EQ(real.param_bytes, kParameterBytes);
      EXPECT_EQ(real.grad_bytes, kParameterBytes);
      EXPECT_EQ(real.optimizer_state_bytes, 2 * kParameterBytes);
      // The flat bucket's copy of the gradients, at the end of the second backward: parameters,
      // gradients and Adam's two moments, the bucket, and the 4-byte loss.
      if (name == "flat_bucket") {
        EXPECT_EQ(PeakOfPhase(real, "backward"), 5 * kParameterBytes + 4);
      }
    }
  }
  // The averaging moved real numbers: ranks that drew different batches hold the same gradients after
  // the first backward (so Adam's step leaves them the same parameters), which differ from rank 0's own
  // (the world-1 run, whose batches are rank 0's); both ways of averaging give the same bytes.
  const std::string& averaged = VariantNamed(cpu, "per_gradient_r0").measurement->grad_digest;
  EXPECT_EQ(VariantNamed(cpu, "per_gradient_r1").measurement->grad_digest, averaged);
  EXPECT_EQ(VariantNamed(cpu, "flat_bucket_r0").measurement->grad_digest, averaged);
  EXPECT_EQ(VariantNamed(cpu, "flat_bucket_r1").measurement->grad_digest, averaged);
  const VariantMeasurement& alone = *VariantNamed(cpu, "alone").measurement;
  EXPECT_NE(alone.grad_digest, averaged);
  EXPECT_FALSE(alone.parallel.has_value());
  EXPECT_TRUE(alone.ranks.empty());
}

// Note [A rank's groups live until it exits] (workload/parallel/rank_group.cpp): rank 1 fails after the group
// is made; rank 0, waiting for it in a collective, is ended by the runner, and rank 1 is named.
TEST(WorkloadRanks, AnOomInRankOneAfterTheGroupIsMadeNamesRankOne) {
  testing::ScratchFolder folder("workload-ranks-inject");
  json scenario = json::parse(ExampleAtWorldTwo());
  scenario["variants"] = {{"two", json::object()}};
  const std::string file = folder.Write("two.json", scenario.dump());
  for (const std::string nth : {"10", "20", "40"}) {  // forward of the first step, of the second, its optimizer
    const RunResults report = RunOn(file, "cpu", {"rank=1,nth=" + nth});
    const VariantMeasurement& m = *VariantNamed(report, "two").measurement;
    EXPECT_EQ(Name(m.outcome), "oom") << nth;
    EXPECT_EQ(m.error.rfind("rank 1 of 2: ", 0), 0u) << nth << ": " << m.error;
    ASSERT_EQ(m.ranks.size(), 2u);
    EXPECT_EQ(Name(m.ranks[1].outcome), "oom") << nth;
  }
}

MeasureOptions AtWorld(int64_t world, int64_t rank) {
  MeasureOptions options;
  options.backend = "meta";
  options.knobs = {{"batch", int64_t{64}}, {"hidden", int64_t{512}}, {"flat_bucket", false}};
  options.world = world;
  options.rank = rank;
  return options;
}

TEST(WorkloadRanks, MeasureSimulatesOneRankOfAnyWorld) {
  const Measurement two = Measure("classifier_data_parallel", AtWorld(2, 0));
  const Measurement eight = Measure("classifier_data_parallel", AtWorld(8, 7));
  ASSERT_EQ(eight.outcome, "pass") << eight.error;
  EXPECT_EQ(eight.world, 8);
  EXPECT_EQ(eight.rank, 7);
  EXPECT_EQ(eight.process_group, "fake");
  // A replica's memory does not depend on the world size.
  EXPECT_EQ(eight.peak_bytes, two.peak_bytes);
  EXPECT_EQ(eight.gradient_bytes, kParameterBytes);
  EXPECT_THROW(Measure("classifier_data_parallel", AtWorld(8, 8)), std::invalid_argument);
  try {
    Measure("classifier_data_parallel", AtWorld(0, 0));
    ADD_FAILURE() << "world 0 was measured";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "oomguard::Measure: rank 0 of world 0: world must be >= 1 and rank 0 .. world - 1");
  }
}

TEST(WorkloadRanks, WithoutParallelARunIsRankZeroOfOneOnAFakeGroup) {
  int64_t rank = -1, world = -1, group_size = -1;
  std::string group_name;
  bool same_group = false;
  const Measurement m = Measure(
      [&](Context& ctx) {
        rank = ctx.Rank();
        world = ctx.WorldSize();
        const c10::intrusive_ptr<c10d::Backend> group = ctx.ProcessGroup();
        group_size = group->getSize();
        group_name = group->getBackendName();
        same_group = ctx.ProcessGroup().get() == group.get();
        at::Tensor t = at::ones({4}, ctx.options());
        std::vector<at::Tensor> tensors{t};
        group->allreduce(tensors)->wait();  // a sum over one rank: nothing changes, nothing is allocated
      },
      MeasureOptions{});  // cpu, no parallel
  ASSERT_EQ(m.outcome, "pass") << m.error;
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(world, 1);
  EXPECT_EQ(group_size, 1);
  EXPECT_EQ(group_name, "fake");
  EXPECT_TRUE(same_group);
  EXPECT_EQ(m.peak_bytes, 4 * 4);
  EXPECT_EQ(m.process_group, "");
}

}  // namespace
}  // namespace oomguard
