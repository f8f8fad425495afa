#include "verdict/metrics.h"

#include <charconv>

#include "model/metric_names.h"

namespace oomguard {
namespace {

MetricValue Number(double n) { return {false, n, ""}; }

std::optional<MetricValue> Measured(const std::optional<int64_t>& bytes) {
  if (!bytes) return std::nullopt;
  return Number(static_cast<double>(*bytes));
}

// "live_after[2]" -> base "live_after", index 2; no brackets -> index 0.
bool SplitIndex(const std::string& metric, std::string* base, size_t* index) {
  const size_t open = metric.find('[');
  if (open == std::string::npos) {
    *base = metric;
    *index = 0;
    return true;
  }
  *base = metric.substr(0, open);
  auto [end, ec] = std::from_chars(metric.data() + open + 1, metric.data() + metric.size() - 1, *index);
  return ec == std::errc() && *index >= 1;
}

}  // namespace

std::optional<MetricValue> LookupMetric(const VariantMeasurement& m, const std::string& metric) {
  std::string base;
  size_t index = 0;
  if (!SplitIndex(metric, &base, &index)) return std::nullopt;
  const double iterations = static_cast<double>(CompletedIterations(m));
  if (index > 0) {
    const IterationMeasurement* record = IterationNumbered(m, static_cast<int64_t>(index));
    if (record == nullptr) return std::nullopt;  // did not complete, or left out (Note [Bounded iteration records])
    const IterationMeasurement& it = *record;
    if (base == "live_after") return Number(static_cast<double>(it.live_after_bytes));
    if (base == "live_after_backward") return Number(static_cast<double>(it.live_after_backward_bytes));
    if (base == "iteration_peak") return Number(static_cast<double>(it.peak_bytes));
    return std::nullopt;
  }
  if (base.rfind("phase_peak.", 0) == 0) {
    const std::string phase = base.substr(11);
    for (const PhasePeak& p : m.ledger.phase_peaks) {
      if (p.phase == phase) return Number(static_cast<double>(p.peak_bytes));
    }
    return std::nullopt;
  }
  if (base.rfind("diagnosis_bytes.", 0) == 0 || base.rfind("diagnosis_count.", 0) == 0) {
    // Not found is not measured: a check on a diagnosis that did not happen fails, never reads 0.
    const std::optional<DiagnosisKind> kind = DiagnosisKindOfMetric(base.substr(base.find('.') + 1));
    for (const Diagnosis& d : m.diagnoses) {
      if (kind && d.kind == *kind) return Number(static_cast<double>(base[10] == 'b' ? d.bytes : d.count));
    }
    return std::nullopt;
  }
  if (base == "peak") return Number(static_cast<double>(m.ledger.peak_bytes));
  if (base == "alloc_count") return Number(static_cast<double>(m.ledger.alloc_count));
  if (base == "allocated_bytes_total") return Number(static_cast<double>(m.ledger.allocated_bytes_total));
  if (base == "live_after_last") {
    if (m.iterations.empty()) return std::nullopt;
    return Number(static_cast<double>(m.iterations.back().live_after_bytes));
  }
  if (base == "live_growth_per_iteration") {
    auto growth = LiveGrowthPerIteration(m);
    return growth ? std::optional<MetricValue>(Number(*growth)) : std::nullopt;
  }
  if (base == "transfers") return Number(static_cast<double>(m.transfers));
  if (base == "transfer_bytes") return Number(static_cast<double>(m.transfer_bytes));
  if (base == "transfers_per_step" || base == "transfer_bytes_per_step") {
    if (m.iterations.empty()) return std::nullopt;
    const double total = static_cast<double>(base == "transfers_per_step" ? m.transfers : m.transfer_bytes);
    return Number(total / iterations);
  }
  if (base == "retained_grad_bytes") return Measured(m.retained_grad_bytes);
  if (base == "forward_saved_bytes") return Measured(m.forward_saved_bytes);
  if (base == "clip_grad_norm_bytes") return Measured(m.clip_grad_norm_bytes);
  if (base == "param_bytes") return Number(static_cast<double>(m.param_bytes));
  if (base == "grad_bytes") return Measured(m.grad_bytes);
  if (base == "optimizer_state_bytes") return Measured(m.optimizer_state_bytes);
  if (base == "grads") {
    if (m.grad_digest.empty()) return std::nullopt;
    return MetricValue{true, 0, m.grad_digest};
  }
  return std::nullopt;
}

}  // namespace oomguard
