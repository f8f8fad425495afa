// `--inject rank=R,...`: a fault for one rank of a parallel variant (issue #34, item 7).
//
//   std::optional<int64_t> rank; std::string rest;
//   SplitRankClause("rank=1,nth=3", &rank, &rest, &error);   // rank 1, rest "nth=3"
//   InjectionForRank({"rank=1,nth=3", "min-size=1GiB"}, 0);   // {"min-size=1GiB"}
//
// Note [Injection per rank]
// A spec with `rank=R` fires only in rank R; one without fires in every rank (each rank's injector
// counts its own requests, so `nth=5` fails the 5th request of each rank, and the first rank to fail
// ends the variant). `rank=` is a clause of the spec but not an allocation policy: it picks the process
// the spec is given to, so it is split off here, and the rest is an ordinary fault spec
// (allocators/fault_injection.h). Where ranks run for real (cpu, Note [Real ranks on cpu]) each rank's
// child gets the specs that are its own; where one rank is simulated (meta) that rank is the
// variant's `parallel.rank`, and a variant without `parallel` is rank 0. A spec for a rank that does
// not run fires nowhere: its variant runs without it.
// Error policy: SplitRankClause fails on `rank=` that is not a whole number >= 0 or is given twice.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomguard {

// *rank: R of the spec's `rank=R` clause, if any; *rest: the spec without it (the other clauses in
// their order).
[[nodiscard]] bool SplitRankClause(std::string_view spec, std::optional<int64_t>* rank, std::string* rest,
                                   std::string* error);

// The specs that fire in rank `rank`, without their rank= clause; specs that do not split are kept as
// they are (ScenarioLimits reports them).
std::vector<std::string> InjectionForRank(const std::vector<std::string>& specs, int64_t rank);

// A warning for each spec whose `rank=R` names no rank of `world` (it fires nowhere), e.g. "--inject
// rank=5,nth=3: this variant has ranks 0..3 (world 4): nothing was injected".
std::vector<std::string> InjectionForNoRank(const std::vector<std::string>& specs, int64_t world);

}  // namespace oomguard
