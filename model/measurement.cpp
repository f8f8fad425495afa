#include "model/measurement.h"

#include "base/byte_size.h"

namespace oomguard {

void KeepFirstAndLastIterations(VariantMeasurement* m, size_t kept) {
  std::vector<IterationMeasurement>& records = m->iterations;
  if (records.size() <= kept) return;
  const size_t head = kept / 2, tail = kept - head;
  const size_t dropped = records.size() - head - tail;
  records.erase(records.begin() + static_cast<std::ptrdiff_t>(head),
                records.begin() + static_cast<std::ptrdiff_t>(head + dropped));
  m->iterations_left_out += static_cast<int64_t>(dropped);
}

int64_t CompletedIterations(const VariantMeasurement& m) {
  return static_cast<int64_t>(m.iterations.size()) + m.iterations_left_out;
}

const IterationMeasurement* IterationNumbered(const VariantMeasurement& m, int64_t number) {
  if (number < 1 || number > CompletedIterations(m)) return nullptr;
  const int64_t head = m.iterations_left_out == 0 ? CompletedIterations(m)
                                                   : static_cast<int64_t>(m.iterations.size() / 2);
  if (number <= head) return &m.iterations[static_cast<size_t>(number - 1)];
  if (number <= head + m.iterations_left_out) return nullptr;
  return &m.iterations[static_cast<size_t>(number - 1 - m.iterations_left_out)];
}

std::optional<double> LiveGrowthPerIteration(const VariantMeasurement& m) {
  if (m.iterations.size() < 2) return std::nullopt;
  return static_cast<double>(m.iterations.back().live_after_bytes - m.iterations.front().live_after_bytes) /
         static_cast<double>(CompletedIterations(m) - 1);
}

std::string DescribeCudaModel(const CudaModelMeasurement& c) {
  std::string out =
      "allocated " + FormatBytes(c.allocated_peak_bytes) + ", reserved " + FormatBytes(c.reserved_peak_bytes) +
      " (fragmentation " + FormatBytes(c.reserved_peak_bytes - c.allocated_peak_bytes) + "), " +
      std::to_string(c.alloc_retries) + (c.alloc_retries == 1 ? " retry, " : " retries, ") + std::to_string(c.ooms) +
      (c.ooms == 1 ? " OOM" : " OOMs") + (c.decides ? "; the verdict is on reserved bytes" : " predicted");
  if (c.reserved_at_start_bytes > 0) {
    out += "; reserved includes " + FormatBytes(c.reserved_at_start_bytes) +
           " held from the start (cuBLAS workspaces, outside the ledger)";
  }
  return out;
}

RankMeasurement RankOf(const VariantMeasurement& m, int64_t rank) {
  RankMeasurement r;
  r.rank = rank;
  r.outcome = m.outcome;
  r.error = m.error;
  r.measured = true;
  r.peak_bytes = m.ledger.peak_bytes;
  r.peak_phase = m.ledger.peak_phase;
  r.phase_peaks = m.ledger.phase_peaks;
  r.peak_by_origin = m.ledger.peak_by_origin;
  r.iterations = m.iterations;
  r.param_bytes = m.param_bytes;
  r.grad_bytes = m.grad_bytes;
  r.optimizer_state_bytes = m.optimizer_state_bytes;
  r.communication_bytes = m.parallel ? m.parallel->communication_bytes : 0;
  r.duration_ms = m.duration_ms;
  return r;
}

}  // namespace oomguard
