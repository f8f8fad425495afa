#include "reports/rank_text.h"

#include "base/byte_size.h"

namespace oomguard {

const RankMeasurement* HighestRank(const VariantMeasurement& m) {
  const RankMeasurement* highest = nullptr;
  for (const RankMeasurement& r : m.ranks) {
    if (r.measured && (highest == nullptr || r.peak_bytes > highest->peak_bytes)) highest = &r;
  }
  return highest;
}

std::string RankPeaksText(const VariantMeasurement& m) {
  bool alike = !m.ranks.empty();
  for (const RankMeasurement& r : m.ranks) {
    alike = alike && r.measured && r.outcome == VariantOutcome::Pass() && r.peak_bytes == m.ranks[0].peak_bytes &&
            r.peak_phase == m.ranks[0].peak_phase;
  }
  if (alike) {  // the usual data-parallel case: one number says it
    return "all " + std::to_string(m.ranks.size()) + " at " + FormatBytes(m.ranks[0].peak_bytes) +
           (m.ranks[0].peak_phase.empty() ? "" : " in " + m.ranks[0].peak_phase);
  }
  std::string out;
  for (const RankMeasurement& r : m.ranks) {
    out += (out.empty() ? "rank " : ", rank ") + std::to_string(r.rank);
    if (r.ended) {
      out += " ended by the runner";
    } else if (!r.measured) {
      out += " left no measurement";
    } else {
      out += " " + FormatBytes(r.peak_bytes) + (r.peak_phase.empty() ? "" : " in " + r.peak_phase);
      if (r.outcome != VariantOutcome::Pass()) out += " (" + Name(r.outcome) + ")";
    }
  }
  if (const RankMeasurement* highest = HighestRank(m)) out += "; highest: rank " + std::to_string(highest->rank);
  return out;
}

std::string RankLine(const RankMeasurement& r, size_t world) {
  std::string out = "rank " + std::to_string(r.rank) + " of " + std::to_string(world) + ": ";
  if (!r.measured) return out + (r.error.empty() ? "no measurement" : r.error);
  out += Name(r.outcome) + ", peak " + FormatBytes(r.peak_bytes) + (r.peak_phase.empty() ? "" : " in " + r.peak_phase) +
         "; parameters " + FormatBytes(r.param_bytes);
  if (r.grad_bytes) out += ", gradients " + FormatBytes(*r.grad_bytes);
  if (r.optimizer_state_bytes) out += ", optimizer state " + FormatBytes(*r.optimizer_state_bytes);
  out += ", communication buffers " + FormatBytes(r.communication_bytes);
  if (!r.error.empty()) out += "; " + r.error;
  return out;
}

std::string StrategyText(const ParallelMeasurement& p) {
  std::string out = p.strategy;
  if (!p.param_dtype.empty()) out += ", param_dtype " + p.param_dtype;
  if (!p.reduce_dtype.empty()) out += ", reduce_dtype " + p.reduce_dtype;
  if (p.master_weights) out += ", float32 master weights";
  return out;
}

std::string ParallelText(const ParallelMeasurement& p) {
  return "rank " + std::to_string(p.rank) + " of " + std::to_string(p.world) + " (" + StrategyText(p) + ")";
}

}  // namespace oomguard
