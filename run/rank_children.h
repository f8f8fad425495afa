// A variant's real ranks on cpu and cuda (Note [Real ranks on cpu], workload/parallel/rank_group.h), on
// the runner's side: the N children's requests, and one VariantEvidence made of their N ends.
//
//   if (RunsRealRanks(driver.traits(), variant)) {
//     for (const MeasureRequest& r : RankRequests(request, base, variant.parallel.world, timeout)) ...
//     // each a ChildSpec of one gang (base/child_process.h); once all N have ended:
//     MergeRankEvidence(per_rank, variant.parallel.rank, &evidence);
//   }
//
// Note [Whose measurement is the variant's]
// All N ranks run; the variant's measurement (its peak, checks, expectations, baseline) is rank
// `parallel.rank`'s (0 unless the scenario says), the rank meta simulates alone: the same scenario
// reads the same rank on both backends, and a check such as `grad_bytes == ...` means one thing. Every
// rank's numbers are in measurement.ranks[], and the reports name the rank with the highest peak
// where it is not that one. When a rank fails, its measurement is the variant's instead (an OOM is the
// variant's outcome, "rank 1 of 4: ..." its error), or, when its child left none (a crash, a kill, a
// timeout), the variant has none and its exit says "rank 1 of 4: crashed with signal 9 ...".
//
// Note [A failing rank ends the variant]
// A rank whose child ends otherwise than with a passing measurement (kExitRankFailed after an OOM or
// an error, a crash, a kill from outside, its timeout) fails the variant: the runner kills its
// siblings after a 2 s grace unless they end in it (Note [Gangs of children], base/child_process.cpp),
// never leaving them waiting in a collective, and names the first to fail. A sibling that noticed the loss before it was killed (gloo's
// "Connection closed by peer", a timeout in the store) failed because of it, not first: a rank that
// failed otherwise is named before it. Gloo's own timeout (min(--timeout, 30 s)) is the last resort,
// should the runner be gone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/scenario.h"
#include "run/child_protocol.h"
#include "verdict/verdict.h"

namespace oomguard {

// Whether the variant runs as N real ranks on this backend (cpu and cuda, world > 1).
bool RunsRealRanks(const BackendTraits& traits, const VariantSpec& variant);

// Note [Ranks need a GPU each]
// On cuda each real rank is a process on a GPU of its own, rank r on cuda:r (RankDevice), its cap the
// card's, its own caching allocator, joined by NCCL (Note [Real ranks on cuda],
// workload/parallel/rank_group.h): NCCL runs no two ranks of a group on one GPU. A machine with fewer
// GPUs than a variant's world cannot run it, and the plan leaves the scenario UNSUPPORTED with
// RanksUnsupported's reason (run/plan.h, rule 8), as for a backend that is not available: on the
// console, in the results JSON and as JUnit's <skipped>. The whole scenario, not the variant: its
// relations compare its variants, and a scenario sets `parallel` for all its variants but a few.
// World 1 (or no `parallel`) is one process on cuda:0, its collectives on a FakeProcessGroup as
// anywhere a process joined no ranks: NCCL over one GPU would move nothing. `parallel.rank` on cuda is
// what it is on cpu: which rank's measurement is the variant's (Note [Whose measurement is the
// variant's]); every rank runs, on its own GPU.

// The device index of rank `rank` on this backend: the rank on a backend with a device per rank, else 0.
int RankDevice(const BackendTraits& traits, int64_t rank);

// Why the ranks of a variant of world `world` cannot run on a machine with `devices` devices of this
// backend ("needs 2 GPUs for NCCL ranks, this machine has 0 (...)"); empty when they can, or when the
// backend runs no real ranks on devices of their own.
std::string RanksUnsupported(const BackendTraits& traits, int64_t world, int devices);

// Rank r's request: `request` with its own output file (base.rankR.json), the store base.store, and
// gloo's timeout.
std::vector<MeasureRequest> RankRequests(const MeasureRequest& request, const std::string& base, int64_t world,
                                         double timeout_seconds);

// What one rank's child left, in the order the children ended.
struct RankEnd {
  int64_t rank = 0;
  VariantEvidence evidence;      // its measurement, or how its child ended (no name, expectation)
  bool ended_by_runner = false;  // killed because a sibling failed
};

// The variant's evidence from its ranks' ends (Note [Whose measurement is the variant's]): e's name
// and expectation are kept.
void MergeRankEvidence(const std::vector<RankEnd>& ends, int64_t world, int64_t headline_rank, VariantEvidence* e);

}  // namespace oomguard
