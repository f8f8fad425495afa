#include "reports/console_writer.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "base/byte_size.h"
#include "base/shard.h"
#include "model/diagnosis_text.h"
#include "model/measurement.h"
#include "model/phase.h"
#include "reports/rank_text.h"
#include "reports/report_format.h"

namespace oomguard {
namespace {

// What a phase's allocations are, said the way a training step is read.
std::string OriginName(const std::string& phase) {
  Phase known;
  if (!Parse(phase, &known)) return phase;
  switch (known) {
    case Phase::kSetup:
      return "parameters (setup)";
    case Phase::kTransfer:
      return "inputs (transfer)";
    case Phase::kForward:
      return "activations (forward)";
    case Phase::kBackward:
      return "gradients and backward buffers (backward)";
    case Phase::kOptimizer:
      return "optimizer state (optimizer)";
    case Phase::kZeroGrad:
    case Phase::kEval:
    case Phase::kStep:
      break;
  }
  return phase;
}

// The scenario's rule of thumb next to the measurement, row by row (memory_estimate.h).
void WriteEstimate(const MemoryEstimate& e, std::ostream& out) {
  char count[32];
  std::snprintf(count, sizeof count, "%.2f B", static_cast<double>(e.parameter_count) / 1e9);
  out << "              estimate vs measured (" << count << " parameters; activations " << e.activation_formula
      << "):\n";
  char line[160];
  std::snprintf(line, sizeof line, "                %-26s %12s %12s  %s\n", "component", "measured", "estimate",
                "off by");
  out << line;
  for (const EstimateRow& r : e.rows) {
    std::string off = "-";
    if (r.measured) {
      off = FormatSignedBytes(*r.measured - r.estimated);
      if (r.estimated != 0) {
        const double percent =
            100.0 * static_cast<double>(*r.measured - r.estimated) / static_cast<double>(r.estimated);
        off += " (" + FormatPercent(percent) + ")";
      }
    }
    std::snprintf(
        line, sizeof line, "                %-26s %12s %12s  %s\n", r.component.c_str(),
        !r.measured ? "-" : (*r.measured < 0 ? FormatSignedBytes(*r.measured) : FormatBytes(*r.measured)).c_str(),
        FormatBytes(r.estimated).c_str(), off.c_str());
    out << line;
  }
}

// "unchanged", "new", or the peak's change: "+1.80 MiB (+11.1%) regressed".
std::string BaselineWord(const BaselineComparison& c) {
  if (c.verdict == BaselineVerdict::kNew) return "new";
  for (const MetricDiff& d : c.metrics) {
    if (d.metric != "peak_bytes" || d.delta == 0) continue;
    return FormatSignedBytes(d.delta) + " (" + FormatPercent(d.delta_percent) + ") " +
           std::string(BaselineVerdictName(c.verdict));
  }
  return std::string(BaselineVerdictName(c.verdict));
}

// The result code, padded, coloured when the style asks: green passes, red failures, yellow the rest.
std::string Code(ResultCode code, const ConsoleStyle& style, size_t width) {
  const std::string padded = PadRight(std::string(ResultName(code)), width);
  if (!style.color) return padded;
  const char* colour = IsFailure(code) ? "\033[31m" : code == ResultCode::kPass ? "\033[32m" : "\033[33m";
  return colour + padded + "\033[0m";
}

// What PyTorch users read in torch.cuda.memory_stats(), for the cuda backend.
void WriteCudaLine(const CudaMeasurement& c, std::ostream& out) {
  out << "              cuda allocator: allocated " << FormatBytes(c.allocated_peak_bytes) << ", reserved "
      << FormatBytes(c.reserved_peak_bytes) << " (fragmentation "
      << FormatBytes(c.reserved_peak_bytes - c.allocated_peak_bytes) << "), " << c.alloc_retries
      << (c.alloc_retries == 1 ? " retry, " : " retries, ") << c.ooms << (c.ooms == 1 ? " OOM" : " OOMs");
  if (c.allocated_at_start_bytes > 0) {
    out << "; peaks include " << FormatBytes(c.allocated_at_start_bytes) << " held from the start (library workspaces)";
  }
  if (c.timed_transfers > 0) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f ms", c.transfer_ms);
    out << "; " << c.timed_transfers << " host-to-device copies took " << ms;
  }
  out << "\n";
}

// What torch.cuda.memory_stats() would say on a GPU, from a cpu or meta run's model of the caching
// allocator: the verdict under a cap (--verdict reserved), or a prediction (--model-cuda).
void WriteCudaModelLine(const CudaModelMeasurement& c, std::ostream& out) {
  out << "              cuda model: " << DescribeCudaModel(c) << "\n";
}

// Each diagnosis: what it found and costs, the fix in words, each fix measured (--diagnose, explain).
// Advice gets its fix only in detail (explain) or when measured: a run's log stays about its pitfalls.
void WriteDiagnoses(const VariantMeasurement& m, bool detailed, std::ostream& out) {
  for (const Diagnosis& d : m.diagnoses) {
    out << "              " << DiagnosisLabel(d) << " (" << DiagnosisAmount(d) << "): " << d.message << "\n";
    if (detailed || !IsAdvice(d.kind) || !d.measured.empty()) out << "                fix: " << d.fix << "\n";
    for (const MeasuredFix& f : d.measured) {
      out << "                measured: " << MeasuredFixText(f, m.ledger.peak_bytes) << "\n";
    }
  }
}

}  // namespace

ConsoleStyle StyleFor(int fd) {
  ConsoleStyle style;
  const char* no_color = std::getenv("NO_COLOR");
  style.terminal = isatty(fd) == 1;
  style.color = style.terminal && (no_color == nullptr || *no_color == '\0');
  return style;
}

namespace {
// The kernels a meta scenario's variants mirrored: "cuda sm_75" in card mode; "cpu" at a card without
// it, where a reader of "[meta, NVIDIA T4 16GB]" took the numbers for the T4's kernels' (Note [Meta as a
// card], backends/meta/kernel_target.h); else empty (meta without a card, or another backend).
std::string MirroredKernels(const ScenarioResult& s) {
  bool meta = false;
  for (const VariantResult& v : s.variants) {
    if (!v.measurement || v.measurement->backend != "meta") continue;
    if (v.measurement->kernels != "cpu") return v.measurement->kernels;
    meta = true;
  }
  return meta && !s.card.empty() ? "cpu" : "";
}

// "rank 1 of 4 (zero2): parameters 64.75 KiB, gradients 16.19 KiB, optimizer state 32.38 KiB,
// communication buffers 0 B": the rank's share of the step (scenario `parallel`), and the precision it
// ran at where it is not the model's dtype alone ("(fsdp, param_dtype bfloat16, reduce_dtype float32)").
void WriteParallelLine(const VariantMeasurement& m, std::ostream& out) {
  const ParallelMeasurement& p = *m.parallel;
  out << "              " << ParallelText(p) << ": parameters " << FormatBytes(m.param_bytes);
  if (m.grad_bytes) out << ", gradients " << FormatBytes(*m.grad_bytes);
  if (m.optimizer_state_bytes) out << ", optimizer state " << FormatBytes(*m.optimizer_state_bytes);
  out << ", communication buffers " << FormatBytes(p.communication_bytes);
  if (p.buckets_are_gradients) out << " (the gradients' own storage: gradient_as_bucket_view)";
  out << "\n";
}
}  // namespace

void WriteScenarioBlock(const ScenarioResult& s, std::ostream& out, const ConsoleStyle& style) {
  const bool detailed = style.detailed;
  out << Code(s.code, style, 12) << s.name << "  [" << s.backend;
  if (const std::string kernels = MirroredKernels(s); !kernels.empty()) out << ", " << kernels << " kernels";
  if (!s.card.empty()) out << ", " << s.card;
  if (s.cap_bytes > 0) out << ", cap " << FormatBytes(s.cap_bytes);
  out << "]";
  if (s.duration_ms > 0) out << "  " << FormatSeconds(s.duration_ms);
  out << "\n";
  if (!s.error.empty()) out << "            " << s.error << "\n";
  size_t width = 0, outcome_width = 0;
  for (const VariantResult& v : s.variants) {
    width = std::max(width, v.name.size());
    if (v.measurement) outcome_width = std::max(outcome_width, Name(v.measurement->outcome).size());
  }
  for (const VariantResult& v : s.variants) {
    out << "            " << PadRight(v.name, width + 2) << Code(v.code, style, 12);
    if (v.measurement) {
      const VariantMeasurement& m = *v.measurement;
      out << PadRight(Name(m.outcome), outcome_width + 2) << "peak " << PadRight(FormatBytes(m.ledger.peak_bytes), 12)
          << "in " << m.ledger.peak_phase;
      if (auto growth = LiveGrowthPerIteration(m); growth && m.outcome.kind == Outcome::kPass) {
        out << "  growth " << FormatSignedBytes(static_cast<int64_t>(*growth)) << "/iteration";
      }
      if (v.baseline.verdict != BaselineVerdict::kNotCompared) out << "  baseline " << BaselineWord(v.baseline);
      if (m.transfers > 0 && !m.iterations.empty()) {
        out << "  transfers " << m.transfers / CompletedIterations(m) << "/step";
      }
    }
    out << "\n";
    if (v.measurement && v.measurement->cuda) WriteCudaLine(*v.measurement->cuda, out);
    if (v.measurement && v.measurement->cuda_model) WriteCudaModelLine(*v.measurement->cuda_model, out);
    if (v.measurement && v.measurement->parallel) WriteParallelLine(*v.measurement, out);
    if (v.measurement && !v.measurement->ranks.empty()) {  // real ranks (cpu): each one's peak
      out << "              real ranks: " << RankPeaksText(*v.measurement) << "\n";
    }
    if (v.measurement && v.measurement->oom && v.code != ResultCode::kPass) {
      const OomDetail& o = *v.measurement->oom;
      out << "              OOM in " << o.phase << ": tried to allocate " << FormatBytes(o.requested_bytes) << " with "
          << FormatBytes(o.live_bytes) << " live: parameters " << FormatBytes(o.live.parameters_bytes) << ", gradients "
          << FormatBytes(o.live.gradients_bytes) << ", optimizer state " << FormatBytes(o.live.optimizer_state_bytes)
          << ", inputs " << FormatBytes(o.live.inputs_bytes) << ", activations and transient "
          << FormatBytes(o.live.activations_and_transient_bytes);
      if (o.live.communication_bytes > 0) out << ", communication buffers " << FormatBytes(o.live.communication_bytes);
      out << "\n";
    }
    if (v.measurement) {
      for (const std::string& warning : v.measurement->warnings) out << "              warning: " << warning << "\n";
      if (v.measurement->iterations_raised)
        out << "              steady state: " << v.measurement->steady_state << "\n";
      WriteDiagnoses(*v.measurement, detailed, out);
    }
    if (v.measurement && !v.measurement->snapshot.empty()) {
      out << "              snapshot: " << v.measurement->snapshot << " (open it in https://pytorch.org/memory_viz)\n";
    }
    if (v.measurement && !v.measurement->snapshot_error.empty()) {
      out << "              snapshot not written: " << v.measurement->snapshot_error << "\n";
    }
    if (detailed && v.measurement) {
      out << "              phase peaks:";
      const char* separator = " ";
      for (const PhasePeak& p : v.measurement->ledger.phase_peaks) {
        out << separator << p.phase << " " << FormatBytes(p.peak_bytes);
        separator = ", ";
      }
      out << "\n";
      for (const CheckResult& c : v.checks) {
        if (c.holds) out << "              ok     " << c.explanation << "\n";
      }
      if (!v.measurement->ledger.peak_by_origin.empty()) {
        out << "              at the peak, by the phase that allocated it:";
        const char* separator = " ";
        for (const PhasePeak& p : v.measurement->ledger.peak_by_origin) {
          out << separator << OriginName(p.phase) << " " << FormatBytes(p.peak_bytes);
          separator = ", ";
        }
        out << "\n";
      }
      if (v.estimate) WriteEstimate(*v.estimate, out);
    }
    for (const std::string& reason : v.reasons) out << "              " << reason << "\n";
    if (!v.diagnostics.empty()) out << "              stderr: " << v.diagnostics << "\n";
  }
  for (const CheckResult& c : s.checks) {
    out << "            " << (c.holds ? "ok     " : c.skipped ? "skip   " : "FAILED ") << c.explanation << "\n";
  }
}

void WriteRunSummary(const RunResults& report, std::ostream& out, const ConsoleStyle& style) {
  // The table, as data first: one row per variant (or per scenario without variants).
  std::vector<std::vector<std::string>> rows = {
      {"scenario", "variant", "backend", "card", "outcome", "peak", "baseline", "delta", "delta %", "peak phase"}};
  std::vector<ResultCode> codes = {ResultCode::kPass};
  for (const ScenarioResult& s : report.scenarios) {
    const std::string limit = CardOrCap(s.card, s.cap_bytes);
    const std::string card = limit.empty() ? "-" : limit;
    if (s.variants.empty()) {
      rows.push_back({s.name, "-", s.backend, card, std::string(ResultName(s.code)), "", "", "", "", ""});
      codes.push_back(s.code);
    }
    for (const VariantResult& v : s.variants) {
      std::vector<std::string> row = {s.name, v.name, s.backend, card, std::string(ResultName(v.code)),
                                      "",     "",     "",        "",   ""};
      if (v.measurement) {
        row[5] = FormatBytes(v.measurement->ledger.peak_bytes);
        row[9] = v.measurement->ledger.peak_phase;
      }
      for (const MetricDiff& d : v.baseline.metrics) {
        if (d.metric != "peak_bytes") continue;
        row[6] = FormatBytes(d.baseline);
        row[7] = FormatSignedBytes(d.delta);
        row[8] = FormatPercent(d.delta_percent);
      }
      if (v.baseline.verdict == BaselineVerdict::kNew) row[6] = "new";
      rows.push_back(row);
      codes.push_back(v.code);
    }
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  out << "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < rows[r].size(); ++c) {
      const bool last = c + 1 == rows[r].size();
      line += c == 4 && r > 0 ? Code(codes[r], style, widths[c] + 2)
              : last          ? rows[r][c]
                              : PadRight(rows[r][c], widths[c] + 2);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  }
  std::map<std::string, int> counts;
  int failures = 0;
  for (const ScenarioResult& s : report.scenarios) {
    ++counts[std::string(ResultName(s.code))];
    failures += IsFailure(s.code);
  }
  for (const ScenarioResult& s : report.skipped) ++counts[std::string(ResultName(s.code))];  // not in the table
  out << "\n"
      << report.scenarios.size() + report.skipped.size() << " scenarios on " << report.backend << " in "
      << FormatSeconds(report.duration_ms) << ":";
  for (const auto& [code, n] : counts) out << " " << n << " " << code;
  out << (failures ? "  (" + std::to_string(failures) + " failing)" : "") << "\n";
  for (const std::string& note : report.notes) out << "note: " << note << "\n";
  if (const ShardTally& t = report.shard; t.shard.Sharded()) {
    out << "shard " << ShardName(t.shard) << ": " << t.files << " of " << t.run_files << " scenario files\n";
  }
  // Where the time went: what the measurements needed per job against the wall (Note [Warm children]).
  if (const RunOverhead o = OverheadOf(report); !report.children.empty() && o.measured_ms > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2fx", o.wall_per_measured);
    out << "time: " << FormatSeconds(o.wall_ms) << " wall for " << FormatSeconds(o.measured_ms) << " of measurement at "
        << o.jobs << (o.jobs == 1 ? " job: " : " jobs: ") << ratio << " what the measurements take (children "
        << report.children << (report.children_reason.empty() ? "" : ": " + report.children_reason) << ")\n";
  }
  int improved = 0, fresh = 0;
  for (const ScenarioResult& s : report.scenarios) {
    for (const VariantResult& v : s.variants) {
      improved += v.baseline.verdict == BaselineVerdict::kImproved;
      fresh += v.baseline.verdict == BaselineVerdict::kNew;
    }
  }
  if (report.updating_baselines) return;  // the update itself says what it records
  if (improved > 0) {
    out << improved << " variant(s) use less memory than their baseline: record it with --update-baselines\n";
  }
  if (fresh > 0 && !report.strict) {
    out << fresh << " variant(s) have no baseline yet (--strict fails them; --update-baselines records them)\n";
  }
}

}  // namespace oomguard
