// `oomguard fit SCENARIO --knob world`: per card and strategy, the smallest world size at which one
// rank's step fits. What is fitted, what a trial at world W measures, and which strategies are not
// searched; the search itself is FitSearch with FitDirection::kSmallestFitting over KnobValues::Nodes.
//
//   std::string error;
//   if (!oomguard::CheckWorldKnob(spec, values, &error)) { ... usage error, exit 2 ... }
//   std::string why = oomguard::WorldDoesNotFall(spec, values, trial, probe_cap);  // ddp, or a workload
//                                                                                  // that shards nothing
//
// Note [What a world fit fits]
// Only a variant with `parallel` (any key of it set apart from the defaults: a world above 1, a
// strategy, a bucket size) is fitted: its strategy is what the table's column is about. A variant
// without it is the single-process step, which world does not change: `--knob world` leaves it out
// (named under the table, and in the JSON's left_out), and naming it with --variant is a usage error,
// as is a scenario with no parallel variant at all. The variant's own world and rank are replaced; its
// data.batch stays each rank's batch (the global batch grows with the world). World 1 is the
// single-process step (no group), which every strategy starts from.
//
// Note [A workload's world fit]
// A registered workload's variant with `parallel` ({"world": N, "rank": r}: Note [A workload's own
// ranks], workload/user_workload_run.h) is fitted too: a trial at world W runs the workload's own code
// as rank r of W (r: the variant's parallel.rank, default 0), its ctx.ProcessGroup() a FakeProcessGroup
// of W on meta, and fits when that rank fits. Only that rank is measured: the workload's code decides
// what each rank holds, and the variant names the rank it cares about; a rank r the first world searched
// does not have (r >= that world) is a usage error. Its column's strategy is "own". Without
// `parallel` the variant is left out, as a layer list's is, and a workload scenario with none is the
// usage error that names "parallel": {"world": 2}.
//
// Note [Which ranks a world fit measures]
// A world fits when every rank fits. zero1 and zero2 give every rank a slice of the same size S of the
// padded flat buffer, but the padding sits at the end, on the last rank, which so owns fewer parameter
// elements (less optimizer state); every other rank holds a full slice (Note [One simulated rank],
// workload/parallel/data_parallel.h). The ranks between differ from rank 0 only in which parameters their
// slice crosses. So a trial at world W > 1 measures rank 0 and rank W - 1, the second only when the
// first fits, and fits when both do, with the larger of the two peaks. (fsdp's shards, padded per
// parameter, follow the same pattern: full chunks first, the short one last.) A trial counts once in
// `trials` whether it measured one rank or two.
//
// Note [A strategy whose peak does not fall]
// ddp replicates parameters, gradients and optimizer state on every rank, and its buckets do not
// shrink with the world: no world fits where world 1 does not (world 2 and above add the buckets). So
// ddp is not searched to --max: one trial at the first world size decides it, and the table says why.
// A workload's code is not known in advance, so its trials say it (Note [A workload whose memory does
// not fall]).
//
// Note [A workload whose memory does not fall]
// A workload that shards nothing (data parallelism by hand: every rank holds the whole model) holds as
// much at world 4096 as at world 1, and a search would run every world size to --max to report "none".
// So before its search a workload variant is measured at three worlds: the first searched, the next
// (doubled) and the last, under a probe cap: none on meta (shapes only: any peak is measured), the
// largest cap fitted elsewhere (cpu allocates what it measures). When the first fits and neither larger
// world has a lower peak (or runs out of memory where the first fits), its memory does not fall as the
// world grows: only the first world is searched, and the table's note gives the three peaks. Otherwise
// (a lower peak, a first world that does not fit the probe cap, an error) the search runs as usual.
// Three points, not two: a rank that allocates per peer (a gather into world x its slice) may hold more
// at 4096 than at 1 while sharding still helps at 2; memory that falls only between the second and the
// last world is what this misses. The probe's trials are not counted in the cards' trials; the
// progress line shows each (trial n of the three) and ends the probe with its count and time, apart
// from the first card's (reports/fit_progress.h).
//
// Error policy: CheckWorldKnob returns false with a one-line message (user input, exit 2); nothing
// here throws but the trials WorldDoesNotFall runs, whose exceptions pass through.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fit/fit_search.h"
#include "fit/knob_values.h"
#include "model/scenario.h"

namespace oomguard {

inline constexpr const char* kWorldKnob = "world";
inline constexpr int64_t kDefaultMaxWorld = 4096;
inline constexpr int64_t kDefaultGpusPerNode = 8;

// Whether the variant has `parallel` (Note [What a world fit fits]).
bool HasParallel(const VariantSpec& spec);

// Whether `spec` can be fitted over the world sizes `values`; else false with the reason (a workload:
// Note [A workload's world fit]).
[[nodiscard]] bool CheckWorldKnob(const VariantSpec& spec, const KnobValues& values, std::string* error);

// Keeps in *variants those with `parallel` and names the others in *left_out, when the variants were
// not named (--variant); false with the reason when none is left. Named variants stay, for
// CheckWorldKnob to judge each.
[[nodiscard]] bool SelectWorldVariants(const std::string& scenario, bool named,
                                       std::vector<const VariantSpec*>* variants, std::vector<std::string>* left_out,
                                       std::string* error);

// `spec` as rank `rank` of `world`.
VariantSpec WithWorld(const VariantSpec& spec, int64_t world, int64_t rank);

// Why the strategy's per-rank peak does not fall as the world grows (Note [A strategy whose peak does
// not fall]), or empty when it does.
std::string WorldDoesNotShrink(const ParallelSpec& parallel);

// Told of each probe trial as it ends: the n-th of `of` (the worlds the probe would try), at `world`.
using ProbeObserver = std::function<void(int64_t n, int64_t of, int64_t world, const Trial& trial)>;

// The same for any variant: a layer list's by its strategy; a workload's from `trial` at three of
// `values` under probe_cap (Note [A workload whose memory does not fall]), each trial told to
// `observe` (if set). Exceptions from the trial pass through.
std::string WorldDoesNotFall(const VariantSpec& spec, const KnobValues& values, const TrialFunction& trial,
                             int64_t probe_cap, const ProbeObserver& observe = {});

// The strategy a world fit's column names: parallel.strategy, or "own" for a workload.
std::string WorldStrategy(const VariantSpec& spec);

// The ranks a trial at `world` measures, in order: {0} at world 1, else {0, world - 1}.
std::vector<int64_t> MeasuredRanks(int64_t world);
// For `spec`: a workload's parallel.rank alone (Note [A workload's world fit]), else MeasuredRanks(world).
std::vector<int64_t> MeasuredRanks(const VariantSpec& spec, int64_t world);

// One world's trial from its ranks' (in MeasuredRanks order, stopping at the first that does not
// fit): the first rank's outcome that is not a fit, else a fit with the largest peaks of all; the
// warnings of every rank, each once; the first rank's steady state.
Trial CombineRankTrials(const std::vector<Trial>& ranks);

}  // namespace oomguard
