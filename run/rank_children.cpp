#include "run/rank_children.h"

#include <algorithm>

#include "base/check.h"

namespace oomguard {
namespace {

constexpr double kGlooTimeoutSeconds = 30;  // Note [A failing rank ends the variant]

bool Failed(const RankEnd& end) {
  return !end.evidence.measurement || end.evidence.measurement->outcome != VariantOutcome::Pass();
}

// A failure that is a sibling's loss seen from this rank (gloo's words for a peer gone, a store or
// collective that timed out waiting for it), not a failure of its own.
bool SawASiblingGo(const RankEnd& end) {
  const std::string text = (end.evidence.measurement ? end.evidence.measurement->error : end.evidence.exit) + "\n" +
                           end.evidence.diagnostics;
  for (const char* words : {"a sibling rank gone", "closed by peer", "Connection reset", "Timed out", "timed out",
                            "Socket Timeout"}) {
    if (text.find(words) != std::string::npos) return true;
  }
  return false;
}

std::string RankOfWorld(int64_t rank, int64_t world) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world);
}

}  // namespace

bool RunsRealRanks(const BackendTraits& traits, const VariantSpec& variant) {
  return traits.real_ranks && variant.parallel.active();
}

int RankDevice(const BackendTraits& traits, int64_t rank) {
  return traits.device_per_rank ? static_cast<int>(rank) : 0;
}

std::string RanksUnsupported(const BackendTraits& traits, int64_t world, int devices) {
  if (!traits.real_ranks || !traits.device_per_rank || world <= 1 || world <= devices) return "";
  const std::string n = std::to_string(world);
  return "needs " + n + " GPUs for NCCL ranks, this machine has " + std::to_string(devices) +
         " (--backend meta simulates one rank at any world; --backend cpu runs " + n + " real ranks on Gloo)";
}

std::vector<MeasureRequest> RankRequests(const MeasureRequest& request, const std::string& base, int64_t world,
                                         double timeout_seconds) {
  std::vector<MeasureRequest> requests;
  for (int64_t rank = 0; rank < world; ++rank) {
    MeasureRequest r = request;
    r.out_path = base + ".rank" + std::to_string(rank) + ".json";
    r.ranks_store = base + ".store";
    r.rank = rank;
    r.ranks_timeout_ms = static_cast<int64_t>(std::min(timeout_seconds, kGlooTimeoutSeconds) * 1000);
    requests.push_back(std::move(r));
  }
  return requests;
}

void MergeRankEvidence(const std::vector<RankEnd>& ends, int64_t world, int64_t headline_rank, VariantEvidence* e) {
  // The first to fail, in the order the children ended; one that only saw a sibling go comes after.
  // Among the others, one that measured its own failure (an OOM, an error) comes before one that died
  // without a measurement: under load a rank blocked in a collective can die of its peer's exit (gloo
  // aborting on the closed connection) before the runner has read the peer's end.
  const RankEnd* culprit = nullptr;
  for (const int pass : {0, 1, 2}) {
    for (const RankEnd& end : ends) {
      if (culprit != nullptr || end.ended_by_runner || !Failed(end)) continue;
      const bool consequence = SawASiblingGo(end), measured = end.evidence.measurement.has_value();
      if ((pass == 0 && !consequence && measured) || (pass == 1 && !consequence && !measured) ||
          (pass == 2 && consequence)) {
        culprit = &end;
      }
    }
  }
  std::vector<RankMeasurement> ranks(static_cast<size_t>(world));
  const RankEnd* headline = nullptr;
  std::string ended, stopped;
  for (const RankEnd& end : ends) {
    RankMeasurement& r = ranks[static_cast<size_t>(end.rank)];
    if (end.evidence.measurement) {
      r = RankOf(*end.evidence.measurement, end.rank);
    } else {
      r.rank = end.rank;
      r.outcome = VariantOutcome::Error(ErrorCategory::kError);
      r.error = end.evidence.exit;
    }
    if (end.ended_by_runner) {
      r.ended = true;
      r.error = "ended by the runner after " + (culprit ? RankOfWorld(culprit->rank, world) : "a sibling") + " failed";
      ended += (ended.empty() ? "" : ", ") + std::to_string(end.rank);
    } else if (&end != culprit && Failed(end) && SawASiblingGo(end)) {
      stopped += (stopped.empty() ? "" : ", ") + std::to_string(end.rank);
    }
    if (end.rank == headline_rank) headline = &end;
  }
  OOMGUARD_CHECK(culprit != nullptr || headline != nullptr)
      << "rank " << headline_rank << " of " << world << " never ran";
  const RankEnd& chosen = culprit ? *culprit : *headline;
  e->timed_out = chosen.evidence.timed_out;
  e->input_error = chosen.evidence.input_error;
  e->diagnostics = chosen.evidence.diagnostics;
  e->measurement = chosen.evidence.measurement;
  // What became of the others: ended by the runner, or stopped by themselves in a collective that lost
  // the culprit (Note [A collective that fails on a real rank], workload/loop/variant_run.cpp).
  const auto ranks_named = [](const std::string& list) {
    return std::string(list.find(',') == std::string::npos ? "rank " : "ranks ") + list;
  };
  std::string others;
  if (!ended.empty()) others = "the runner ended " + ranks_named(ended);
  if (!stopped.empty()) {
    others += (others.empty() ? "" : "; ") + ranks_named(stopped) + " stopped in a collective without it";
  }
  if (!others.empty()) others = " (" + others + ")";
  if (culprit && e->measurement) {
    e->measurement->error = RankOfWorld(culprit->rank, world) + ": " + e->measurement->error + others;
  } else if (culprit) {
    e->exit = RankOfWorld(culprit->rank, world) + ": " + culprit->evidence.exit + others;
  }
  if (e->measurement) e->measurement->ranks = std::move(ranks);
}

}  // namespace oomguard
