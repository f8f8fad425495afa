// The metric names check expressions use, and what kind of number each is. A run's MetricLookup answers
// these names (check_expression.h); scenarios/FORMAT.md documents what each measures.
//
//   std::optional<MetricKind> kind = FindMetricKind("phase_peak");  // kBytes; needs ".<phase>"
//   ValidateMetricName("peek", false, 0, true, &kind, &error);      // "unknown metric 'peek'; did you mean ..."
//
// Header-only; nothing here throws.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/did_you_mean.h"
#include "model/diagnosis.h"
#include "model/phase.h"

namespace oomguard {

enum class MetricKind { kBytes, kCount, kDigest };

// The phases of a step, as phase_peak.<phase> names them, in the order a step runs them (model/phase.h).
inline const std::vector<std::string> kMetricPhases = AllNames<Phase>();

// Every metric, in documentation order. phase_peak is always written phase_peak.<phase>, live_after
// always live_after[N] with N >= 1 the iteration.
inline const std::vector<std::pair<std::string, MetricKind>> kMetrics = {
    {"peak", MetricKind::kBytes},
    {"alloc_count", MetricKind::kCount},
    {"allocated_bytes_total", MetricKind::kBytes},
    {"phase_peak", MetricKind::kBytes},
    {"live_after", MetricKind::kBytes},
    {"live_after_last", MetricKind::kBytes},
    {"live_after_backward", MetricKind::kBytes},
    {"iteration_peak", MetricKind::kBytes},
    {"live_growth_per_iteration", MetricKind::kBytes},
    {"transfers", MetricKind::kCount},
    {"transfer_bytes", MetricKind::kBytes},
    {"transfers_per_step", MetricKind::kCount},
    {"transfer_bytes_per_step", MetricKind::kBytes},
    {"retained_grad_bytes", MetricKind::kBytes},
    {"forward_saved_bytes", MetricKind::kBytes},
    {"param_bytes", MetricKind::kBytes},
    {"grad_bytes", MetricKind::kBytes},
    {"optimizer_state_bytes", MetricKind::kBytes},
    {"clip_grad_norm_bytes", MetricKind::kBytes},
    {"grads", MetricKind::kDigest},
};

// The list as error messages show it.
inline constexpr const char* kMetricList =
    "peak, alloc_count, allocated_bytes_total, phase_peak.<phase>, live_after[N], live_after_last, "
    "live_after_backward[N], iteration_peak[N], "
    "live_growth_per_iteration, transfers, transfer_bytes, transfers_per_step, transfer_bytes_per_step, "
    "retained_grad_bytes, forward_saved_bytes, param_bytes, grad_bytes, optimizer_state_bytes, "
    "clip_grad_norm_bytes, grads, diagnosis_bytes.<kind>, diagnosis_count.<kind>";

// diagnosis_bytes.<kind> and diagnosis_count.<kind> name a diagnosis kind with '_' for '-' (a check
// expression reads '-' as minus): diagnosis_bytes.retained_grad. The kind if `suffix` spells one.
inline std::optional<DiagnosisKind> DiagnosisKindOfMetric(std::string suffix) {
  std::replace(suffix.begin(), suffix.end(), '_', '-');
  DiagnosisKind kind;
  if (!Parse(suffix, &kind)) return std::nullopt;
  return kind;
}

// The metric spelling of every kind: retained_grad, eval_keeps_graph, ...
inline std::vector<std::string> DiagnosisMetricKinds() {
  std::vector<std::string> out;
  for (std::string name : AllNames<DiagnosisKind>()) {
    std::replace(name.begin(), name.end(), '-', '_');
    out.push_back(name);
  }
  return out;
}

// The kind of a metric by its base name ("phase_peak", not "phase_peak.eval"); nullopt if unknown.
inline std::optional<MetricKind> FindMetricKind(std::string_view base_name) {
  for (const auto& [name, kind] : kMetrics) {
    if (name == base_name) return kind;
  }
  return std::nullopt;
}

// Checks a metric as a check expression writes it: `name` is its dotted parts joined ("phase_peak.eval"),
// the index apart (live_after[2]: name "live_after", has_index, index 2). Gives its kind, or returns false
// with a message that suggests a near name. `bare` says refs carry no variant (per-variant checks), which
// lets "pitfall.peak" be explained instead of just rejected.
inline bool ValidateMetricName(const std::string& name, bool has_index, int64_t index, bool bare, MetricKind* kind,
                               std::string* error) {
  const std::string quoted = "'" + name + "'";
  if (name == "phase_peak") {
    *error = "phase_peak needs a phase: phase_peak.<phase> with phase one of " + JoinNames(kMetricPhases, ", ");
    return false;
  }
  if (name.rfind("phase_peak.", 0) == 0) {
    const std::string phase = name.substr(11);
    if (std::find(kMetricPhases.begin(), kMetricPhases.end(), phase) == kMetricPhases.end()) {
      const std::string near = ClosestMatch(phase, kMetricPhases);
      *error = "unknown phase '" + phase + "' in " + quoted + (near.empty() ? "" : "; did you mean '" + near + "'?") +
               " (phases: " + JoinNames(kMetricPhases, ", ") + ")";
      return false;
    }
    *kind = MetricKind::kBytes;
  } else if (name.rfind("diagnosis_bytes.", 0) == 0 || name.rfind("diagnosis_count.", 0) == 0) {
    const std::string suffix = name.substr(name.find('.') + 1);
    if (!DiagnosisKindOfMetric(suffix)) {
      const std::vector<std::string> kinds = DiagnosisMetricKinds();
      const std::string near = ClosestMatch(suffix, kinds);
      *error = "unknown diagnosis kind '" + suffix + "' in " + quoted +
               (near.empty() ? "" : "; did you mean '" + near + "'?") +
               " (kinds, with _ for -: " + JoinNames(kinds, ", ") + ")";
      return false;
    }
    *kind = name[10] == 'b' ? MetricKind::kBytes : MetricKind::kCount;
  } else if (std::optional<MetricKind> found = FindMetricKind(name)) {
    *kind = *found;
  } else {
    const size_t dot = name.find('.');
    if (bare && dot != std::string::npos && !FindMetricKind(name.substr(0, dot)) &&
        FindMetricKind(name.substr(dot + 1))) {
      *error = "unknown metric " + quoted + ": per-variant checks name bare metrics of their own variant ('" +
               name.substr(dot + 1) + "'); comparisons between variants are relations (the top-level \"checks\")";
      return false;
    }
    std::vector<std::string> candidates;
    for (const auto& [metric, metric_kind] : kMetrics) candidates.push_back(metric);
    for (const std::string& p : kMetricPhases) candidates.push_back("phase_peak." + p);
    const std::string near = ClosestMatch(name, candidates);
    *error = "unknown metric " + quoted + (near.empty() ? "" : "; did you mean '" + near + "'?") +
             " (metrics: " + kMetricList + ")";
    return false;
  }
  const bool indexed = name == "live_after" || name == "live_after_backward" || name == "iteration_peak";
  if (indexed && !has_index) {
    *error = name + " needs an iteration: " + name + "[N] with N >= 1" +
             (name == "live_after" ? " (or live_after_last)" : "");
    return false;
  }
  if (!indexed && has_index) {
    *error =
        "metric " + quoted + " takes no index (only live_after[N], live_after_backward[N] and iteration_peak[N] do)";
    return false;
  }
  if (has_index && index < 1) {
    *error = name + "[" + std::to_string(index) + "]: iterations count from 1";
    return false;
  }
  return true;
}

}  // namespace oomguard
