#include "allocators/fault_injection.h"

#include <gtest/gtest.h>

namespace oomguard {
namespace {

// Feeds `count` requests of `bytes` in `phase`; returns the 1-based indices that failed.
std::vector<int64_t> Feed(FaultInjector& injector, int count, int64_t bytes = 64, std::string_view phase = "forward") {
  std::vector<int64_t> failed;
  for (int i = 0; i < count; ++i) {
    if (auto f = injector.Check(bytes, phase)) failed.push_back(f->allocation_index);
  }
  return failed;
}

TEST(FaultInjection, NthFailsExactlyTheNthRequest) {
  FaultInjector injector(NthAllocation(3));
  EXPECT_EQ(Feed(injector, 10), (std::vector<int64_t>{3}));
  EXPECT_EQ(injector.requests_seen(), 10);
}

TEST(FaultInjection, MinimumSizeFailsFromTheBoundaryUp) {
  FaultInjector injector(MinimumSize(1024));
  EXPECT_FALSE(injector.Check(1023, "forward"));
  EXPECT_TRUE(injector.Check(1024, "forward"));
  EXPECT_TRUE(injector.Check(4096, "forward"));
  EXPECT_EQ(injector.failures().size(), 2u);
}

TEST(FaultInjection, PhaseFailsOnlyInThatPhase) {
  FaultInjector injector(InPhase("backward"));
  EXPECT_FALSE(injector.Check(8, "forward"));
  EXPECT_TRUE(injector.Check(8, "backward"));
  EXPECT_FALSE(injector.Check(8, "optimizer"));
}

TEST(FaultInjection, ProbabilityIsReproducibleUnderASeed) {
  FaultInjector a(WithProbability(0.25, 42)), b(WithProbability(0.25, 42)), c(WithProbability(0.25, 43));
  const auto fa = Feed(a, 4000), fb = Feed(b, 4000), fc = Feed(c, 4000);
  EXPECT_EQ(fa, fb);
  EXPECT_NE(fa, fc);
  // A fair 0.25 over 4000 requests lands within 6 standard deviations (27.4) of 1000.
  EXPECT_GT(fa.size(), 835u);
  EXPECT_LT(fa.size(), 1165u);
  FaultInjector never(WithProbability(0, 1)), always(WithProbability(1, 1));
  EXPECT_TRUE(Feed(never, 100).empty());
  EXPECT_EQ(Feed(always, 100).size(), 100u);
}

TEST(FaultInjection, AllOfCountsOnlyRequestsThatReachALaterClause) {
  std::vector<std::unique_ptr<FaultPolicy>> clauses;
  clauses.push_back(InPhase("backward"));
  clauses.push_back(NthAllocation(2));
  FaultInjector injector(AllOf(std::move(clauses)));
  EXPECT_FALSE(injector.Check(8, "forward"));
  EXPECT_FALSE(injector.Check(8, "backward"));  // 1st in backward
  EXPECT_FALSE(injector.Check(8, "forward"));
  auto failure = injector.Check(16, "backward");  // 2nd in backward: fails
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->allocation_index, 4);
  EXPECT_EQ(failure->bytes, 16);
  EXPECT_EQ(failure->phase, "backward");
  EXPECT_EQ(failure->policy, "phase=backward,nth=2");
  EXPECT_FALSE(injector.Check(8, "backward"));
}

TEST(FaultInjection, AnyOfFailsWhenOneClauseDoes) {
  std::vector<std::unique_ptr<FaultPolicy>> clauses;
  clauses.push_back(NthAllocation(2));
  clauses.push_back(MinimumSize(1000));
  FaultInjector injector(AnyOf(std::move(clauses)));
  EXPECT_FALSE(injector.Check(8, "forward"));
  EXPECT_TRUE(injector.Check(8, "forward"));
  EXPECT_TRUE(injector.Check(5000, "forward"));
  EXPECT_FALSE(injector.Check(8, "forward"));
  EXPECT_EQ(injector.Describe(), "nth=2 | min-size=1000");
}

std::string Describe(const std::string& spec) {
  std::string error;
  auto policy = ParseFaultSpec(spec, &error);
  EXPECT_TRUE(policy) << error;
  return policy ? policy->Describe() : "";
}

std::string SpecError(const std::string& spec) {
  std::string error;
  EXPECT_FALSE(ParseFaultSpec(spec, &error)) << spec;
  return error;
}

TEST(FaultInjection, ParsesSpecStrings) {
  EXPECT_EQ(Describe("nth=5"), "nth=5");
  EXPECT_EQ(Describe("min-size=64MiB"), "min-size=67108864");
  EXPECT_EQ(Describe("p=0.01,seed=7"), "p=0.01,seed=7");
  EXPECT_EQ(Describe("seed=7,p=0.5"), "p=0.5,seed=7");
  EXPECT_EQ(Describe("p=0.5"), "p=0.5,seed=0");
  EXPECT_EQ(Describe("phase=backward,nth=2"), "phase=backward,nth=2");
  // Note [Filters before counters]: the written order does not matter.
  EXPECT_EQ(Describe("nth=2,phase=backward"), "phase=backward,nth=2");
  EXPECT_EQ(Describe("p=0.5,min-size=1KiB"), "min-size=1024,p=0.5,seed=0");
}

// D7: "nth=2,phase=backward" counted every request and then vetoed the 2nd unless it was in backward,
// so it never fired; now it fails the 2nd request made in backward.
TEST(FaultInjection, NthCountsTheRequestsTheFiltersLetThroughWhateverTheOrder) {
  std::string error;
  FaultInjector injector(ParseFaultSpec("nth=2,phase=backward", &error));
  EXPECT_FALSE(injector.Check(8, "forward"));
  EXPECT_FALSE(injector.Check(8, "forward"));
  EXPECT_FALSE(injector.Check(8, "backward"));
  EXPECT_FALSE(injector.Check(8, "optimizer"));
  const auto failed = injector.Check(16, "backward");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->allocation_index, 5);
  EXPECT_EQ(failed->bytes, 16);
  EXPECT_FALSE(injector.Check(16, "backward"));
}

// D7: specs that could never fire were accepted.
TEST(FaultInjection, RejectsSpecsThatCouldNeverFire) {
  const std::vector<std::string> phases = {"forward", "backward"};
  std::string error;
  EXPECT_FALSE(ParseFaultSpec("phase=bakward", &error, phases));
  EXPECT_EQ(error,
            "invalid fault spec 'phase=bakward': unknown phase 'bakward'; did you mean 'backward'? (phases: forward, "
            "backward)");
  EXPECT_TRUE(ParseFaultSpec("phase=backward", &error, phases)) << error;
  EXPECT_EQ(SpecError("p=nan"), "invalid fault spec 'p=nan': p must be a probability in (0, 1], got 'nan'");
  EXPECT_EQ(SpecError("p=0"), "invalid fault spec 'p=0': p must be a probability in (0, 1], got '0'");
  const std::string accepted =
      "expected clauses joined by ',' from nth=N, min-size=SIZE, p=P, seed=S, phase=NAME (e.g. phase=backward,nth=2)";
  EXPECT_EQ(SpecError("nth=5,"), "invalid fault spec 'nth=5,': an empty clause (a ',' too many?); " + accepted);
  EXPECT_EQ(SpecError(",nth=5"), "invalid fault spec ',nth=5': an empty clause (a ',' too many?); " + accepted);
  EXPECT_EQ(SpecError("nth=2,nth=3"), "invalid fault spec 'nth=2,nth=3': nth is given twice");
}

TEST(FaultInjection, RejectsBadSpecsPrecisely) {
  const std::string accepted =
      "expected clauses joined by ',' from nth=N, min-size=SIZE, p=P, seed=S, phase=NAME (e.g. phase=backward,nth=2)";
  EXPECT_EQ(SpecError("nth=0"), "invalid fault spec 'nth=0': nth must be a whole number >= 1, got '0'");
  EXPECT_EQ(SpecError("p=1.5"), "invalid fault spec 'p=1.5': p must be a probability in (0, 1], got '1.5'");
  EXPECT_EQ(SpecError("seed=3"), "invalid fault spec 'seed=3': seed is only meaningful with p=P");
  EXPECT_EQ(SpecError("size=3"), "invalid fault spec 'size=3': unknown key 'size'; " + accepted);
  EXPECT_EQ(SpecError("nth"), "invalid fault spec 'nth': 'nth' is not KEY=VALUE; " + accepted);
  EXPECT_EQ(SpecError(""), "invalid fault spec '': " + accepted);
  EXPECT_EQ(SpecError("min-size=12XB"),
            "invalid fault spec 'min-size=12XB': invalid size '12XB': unknown unit 'XB'; expected a size such as "
            "16GiB, 15.5GB, 512MiB, 4096 or 1e9 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
}

}  // namespace
}  // namespace oomguard
