#include "reports/fit_report.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "base/atomic_file.h"
#include "base/byte_size.h"
#include "base/did_you_mean.h"
#include "base/json_text.h"
#include "reports/report_format.h"

namespace oomguard {
namespace {

using nlohmann::json;

std::string Cell(const CardFit& fit, const FitResults& report) {
  if (!fit.error.empty()) return "error";
  if (report.smallest) {
    if (!fit.min_value) return "none";
    const bool bounded = fit.last_oom_value || *fit.min_value <= 1;  // world 1 has nothing below it
    return (bounded ? "" : "<= ") + std::to_string(*fit.min_value) + " (" + FormatBytes(fit.peak_bytes_at_min) + ")";
  }
  if (!fit.max_value) return "none";
  return (fit.first_oom_value ? "" : ">= ") + std::to_string(*fit.max_value) + " (" +
         FormatBytes(fit.peak_bytes_at_max) + ")";
}

// Note [World sizes a fit tries] (fit/knob_values.h), in words: "1, 2, 4, then multiples of 8".
std::string WorldSizesText(int64_t per_node) {
  if (per_node <= 1) return "every world size";
  std::string text;
  for (int64_t p = 1; p < per_node; p *= 2) text += std::to_string(p) + ", ";
  return text + "then multiples of " + std::to_string(per_node);
}

void WriteTitle(const FitResults& report, std::ostream& out) {
  if (report.smallest) {
    out << report.scenario << " on " << report.backend << ": the smallest " << report.knob_field
        << " at which one rank fits each card (world sizes " << WorldSizesText(report.gpus_per_node) << ", searched "
        << report.min_value << ".." << report.max_value << "; "
        << (report.own_ranks ? "each workload's parallel.rank measured" : "ranks 0 and world - 1 measured");
  } else {
    out << report.scenario << " on " << report.backend << ": the largest " << report.knob_field
        << " that fits each card (searched " << report.min_value << ".." << report.max_value;
  }
  if (report.iterations > 0)
    out << ", " << report.iterations << (report.iterations == 1 ? " iteration" : " iterations") << " per trial";
  out << ")\n\n";
}

std::string ColumnName(const VariantFit& v) {
  if (v.strategy.empty() || v.strategy == v.variant) return v.variant;
  return v.variant + " (" + v.strategy + ")";
}

// The lines under a world table: what "none" and "<=" mean, each variant's note, what was left out.
void WriteWorldNotes(const FitResults& report, std::ostream& out) {
  bool any_none = false, any_min = false;
  for (const VariantFit& v : report.variants) {
    for (const CardFit& fit : v.cards) {
      any_none |= fit.error.empty() && !fit.min_value && v.note.empty();
      any_min |= fit.error.empty() && fit.min_value && !fit.last_oom_value && *fit.min_value > 1;
    }
  }
  std::vector<std::string> lines;
  if (any_none)
    lines.push_back("none: not even " + report.knob_field + " = " + std::to_string(report.max_value) + " fits");
  if (any_min) {
    lines.push_back("<= " + std::to_string(report.min_value) + ": the smallest value searched fits (lower --min)");
  }
  for (const VariantFit& v : report.variants) {
    if (!v.note.empty()) lines.push_back(v.variant + ": " + v.note);
    if (!v.why_none.empty()) lines.push_back(v.variant + ": " + v.why_none);
  }
  if (!report.left_out.empty()) {
    lines.push_back("left out, without `parallel` (the single-process step, which world does not change): " +
                    JoinNames(report.left_out, ", "));
  }
  for (size_t i = 0; i < lines.size(); ++i) out << (i == 0 ? "\n" : "") << lines[i] << "\n";
}

template <typename T>
json OrNull(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

}  // namespace

void WriteFitTable(const FitResults& report, std::ostream& out) {
  WriteTitle(report, out);
  std::vector<std::vector<std::string>> rows = {{"card", "cap"}};
  for (const VariantFit& v : report.variants) rows[0].push_back(ColumnName(v));
  rows[0].push_back("trials");
  const size_t targets = report.variants.empty() ? 0 : report.variants.front().cards.size();
  bool any_none = false, any_max = false;
  for (size_t t = 0; t < targets; ++t) {
    const CardFit& first = report.variants.front().cards[t];
    std::vector<std::string> row = {first.card.empty() ? "-" : first.card, FormatBytes(first.cap_bytes)};
    int64_t trials = 0;
    for (const VariantFit& v : report.variants) {
      const CardFit& fit = v.cards[t];
      row.push_back(Cell(fit, report));
      any_none |= fit.error.empty() && !fit.max_value;
      any_max |= fit.error.empty() && fit.max_value && !fit.first_oom_value;
      trials += fit.trials;
    }
    row.push_back(std::to_string(trials));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) line += c + 1 == row.size() ? row[c] : PadRight(row[c], widths[c] + 3);
    out << line << "\n";
  }
  if (report.smallest) {
    WriteWorldNotes(report, out);
  } else {
    if (any_none) out << "\nnone: not even " << report.knob_field << " = " << report.min_value << " fits\n";
    if (any_max) {
      out << (any_none ? "" : "\n") << ">= " << report.max_value << ": the largest value searched fits (raise --max)\n";
    }
  }
  int64_t total_trials = 0;
  bool first_error = true;
  for (const VariantFit& v : report.variants) {
    std::string error;  // the search stops at its first error, which every later card repeats
    for (const CardFit& fit : v.cards) {
      total_trials += fit.trials;
      if (error.empty()) error = fit.error;
    }
    if (error.empty()) continue;
    out << (first_error ? "\n" : "") << v.variant << ": " << error << "\n";
    first_error = false;
  }
  bool first_note = true;
  for (const VariantFit& v : report.variants) {  // Note [The step that repeats]: what each trial judged
    if (v.steady_state.empty()) continue;
    out << (first_note ? "\n" : "") << v.variant << ": steady state: " << v.steady_state << "\n";
    first_note = false;
  }
  bool first_warning = true;
  for (const VariantFit& v : report.variants) {
    for (const std::string& w : v.warnings) {
      out << (first_warning ? "\n" : "") << v.variant << ": warning: " << w << "\n";
      first_warning = false;
    }
  }
  out << "\n" << total_trials << " trials in " << FormatSeconds(report.duration_ms) << "\n";
}

std::string FitJsonText(const FitResults& report) {
  json variants = json::array();
  for (const VariantFit& v : report.variants) {
    json cards = json::array();
    for (const CardFit& fit : v.cards) {
      json card = {{"card", fit.card.empty() ? json(nullptr) : json(fit.card)}, {"cap_bytes", fit.cap_bytes}};
      if (report.smallest) {
        card["min_value"] = OrNull(fit.min_value);
        card["peak_bytes_at_min"] = fit.min_value ? json(fit.peak_bytes_at_min) : json(nullptr);
        card["last_oom_value"] = OrNull(fit.last_oom_value);
      } else {
        card["max_value"] = OrNull(fit.max_value);
        card["peak_bytes_at_max"] = fit.max_value ? json(fit.peak_bytes_at_max) : json(nullptr);
        card["first_oom_value"] = OrNull(fit.first_oom_value);
      }
      card["trials"] = fit.trials;
      card["error"] = fit.error.empty() ? json(nullptr) : json(fit.error);
      cards.push_back(std::move(card));
    }
    json variant = {{"variant", v.variant},
                    {"cards", cards},
                    {"warnings", v.warnings},
                    {"steady_state", v.steady_state.empty() ? json(nullptr) : json(v.steady_state)}};
    if (report.smallest) {
      variant["strategy"] = v.strategy;
      variant["note"] = v.note.empty() ? json(nullptr) : json(v.note);
      variant["why_none"] = v.why_none.empty() ? json(nullptr) : json(v.why_none);
    }
    variants.push_back(std::move(variant));
  }
  json fit = {{"scenario", report.scenario},
              {"backend", report.backend},
              {"knob", report.knob},
              {"knob_field", report.knob_field},
              {"min", report.min_value},
              {"max", report.max_value},
              {"iterations", report.iterations > 0 ? json(report.iterations) : json(nullptr)},
              {"duration_ms", report.duration_ms},
              {"variants", variants}};
  if (report.smallest) {
    fit["gpus_per_node"] = report.gpus_per_node;
    fit["left_out"] = report.left_out;
  }
  return DumpJson(json{{"schema_version", kFitSchemaVersion}, {"fit", fit}}, 2) + "\n";
}

bool WriteFitJson(const FitResults& report, const std::string& path, std::string* error) {
  return WriteFileAtomically(path, FitJsonText(report), error);
}

}  // namespace oomguard
