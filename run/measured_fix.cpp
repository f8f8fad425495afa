#include "run/measured_fix.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace oomguard {
namespace {

struct Candidate {
  std::string fix;  // as a scenario writes it: "loop.eval.no_grad: true"
  VariantSpec spec;
  bool eval_no_grad = false;  // a workload's eval phases under no_grad
};

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// Note [Which fixes are measured], measured_fix.h.
std::vector<Candidate> CatalogLoopFixes(DiagnosisKind kind, const VariantSpec& spec, const VariantMeasurement& m) {
  std::vector<Candidate> out;
  const auto add = [&](std::string fix, auto edit) {
    Candidate c{std::move(fix), spec};
    edit(c.spec);
    out.push_back(std::move(c));
  };
  const LoopSpec& loop = spec.loop;
  const PitfallSpec& p = spec.pitfalls;
  switch (kind) {
    case DiagnosisKind::kEvalKeepsGraph:
      if (!loop.eval.no_grad) add("loop.eval.no_grad: true", [](VariantSpec& s) { s.loop.eval.no_grad = true; });
      if (loop.loss_history.from == "eval" && loop.loss_history.keep == "attached") {
        add("loop.loss_history.keep: \"item\"", [](VariantSpec& s) { s.loop.loss_history.keep = "item"; });
      }
      break;
    case DiagnosisKind::kGraphKeptAcrossIterations:
      if (loop.loss_history.keep == "attached") {
        add(std::string("loop.loss_history.keep: \"item\"") + (loop.retain_graph ? ", loop.retain_graph: false" : ""),
            [](VariantSpec& s) {
              s.loop.loss_history.keep = "item";
              s.loop.retain_graph = false;
            });
      } else if (loop.retain_graph) {
        add("loop.retain_graph: false", [](VariantSpec& s) { s.loop.retain_graph = false; });
      }
      if (loop.loss_history.from == "eval" && loop.loss_history.keep == "attached" && !loop.eval.no_grad) {
        add("loop.eval.no_grad: true", [](VariantSpec& s) { s.loop.eval.no_grad = true; });
      }
      break;
    case DiagnosisKind::kRetainedGrad:
      if (p.retain_grad) add("pitfalls.retain_grad: false", [](VariantSpec& s) { s.pitfalls.retain_grad = false; });
      break;
    case DiagnosisKind::kLeak:
      if (loop.loss_history.keep == "detached") {
        add("loop.loss_history.keep: \"item\"", [](VariantSpec& s) { s.loop.loss_history.keep = "item"; });
      }
      break;
    case DiagnosisKind::kTransferInRecompute:
      if (p.transfer == "inside")
        add("pitfalls.transfer: \"outside\"", [](VariantSpec& s) { s.pitfalls.transfer = "outside"; });
      break;
    case DiagnosisKind::kInplaceOnSaved:
      if (p.inplace.target != "none" && !p.inplace.op.empty() && p.inplace.op.back() == '_') {
        const std::string op = p.inplace.op.substr(0, p.inplace.op.size() - 1);
        add("pitfalls.inplace.op: " + Quoted(op), [op](VariantSpec& s) { s.pitfalls.inplace.op = op; });
      }
      break;
    case DiagnosisKind::kInplaceOnLeaf:
      break;  // the fix is no_grad around the edit: not a knob
    case DiagnosisKind::kCheckpointRng:
      if (p.checkpoint.segments > 0 && !p.checkpoint.preserve_rng_state) {
        add("pitfalls.checkpoint.preserve_rng_state: true",
            [](VariantSpec& s) { s.pitfalls.checkpoint.preserve_rng_state = true; });
      }
      break;
    case DiagnosisKind::kActivationsDominate: {
      const int64_t batch = spec.data.batch;
      if (batch >= 2 && batch % 2 == 0) {
        add("data.batch: " + std::to_string(batch / 2) + ", loop.accumulate: " + std::to_string(loop.accumulate * 2),
            [](VariantSpec& s) {
              s.data.batch /= 2;
              s.loop.accumulate *= 2;
            });
      }
      const int64_t layers = spec.model.source == "layers" ? static_cast<int64_t>(spec.model.layers.size())
                                                           : (m.module ? m.module->segments : 0);
      if (p.checkpoint.segments == 0 && layers >= 2 && spec.data.extra_inputs.empty()) {
        const int64_t k = std::clamp<int64_t>(std::llround(std::sqrt(static_cast<double>(layers))), 2, layers);
        add("pitfalls.checkpoint.segments: " + std::to_string(k),
            [k](VariantSpec& s) { s.pitfalls.checkpoint.segments = k; });
      }
      if (loop.autocast == "none" && spec.model.dtype == DType::kFloat32) {
        add("loop.autocast: \"bfloat16\"", [](VariantSpec& s) { s.loop.autocast = "bfloat16"; });
      }
      break;
    }
  }
  return out;
}

// A registered workload's code is its own: what the harness can change is around it.
std::vector<Candidate> WorkloadFixes(DiagnosisKind kind, const VariantSpec& spec) {
  std::vector<Candidate> out;
  if (kind == DiagnosisKind::kEvalKeepsGraph) {
    out.push_back({"every eval phase under no_grad (torch::NoGradGuard)", spec, /*eval_no_grad=*/true});
  }
  auto batch = spec.knobs.find("batch");
  if (kind == DiagnosisKind::kActivationsDominate && batch != spec.knobs.end()) {
    if (const int64_t* n = std::get_if<int64_t>(&batch->second); n != nullptr && *n >= 2) {
      Candidate c{"knobs.batch: " + std::to_string(*n / 2) + " (half the effective batch)", spec};
      c.spec.knobs["batch"] = *n / 2;
      out.push_back(std::move(c));
    }
  }
  return out;
}

MeasuredFix Rerun(const Candidate& c, const VariantMeasureOptions& options) {
  VariantMeasureOptions o = options;
  o.diagnose = false;
  o.snapshot = {};
  if (o.model_cuda == ModelCuda::kPredict) o.model_cuda = ModelCuda::kOff;  // the verdict stays
  o.eval_no_grad = c.eval_no_grad;
  o.limits.faults = nullptr;  // the fix's own peak, not a rehearsal of the injected fault
  const VariantMeasurement r = MeasureVariant(c.spec, o);
  MeasuredFix fix;
  fix.fix = c.fix;
  fix.outcome = Name(r.outcome);
  fix.peak_bytes = r.ledger.peak_bytes;
  fix.live_after_bytes = r.iterations.empty() ? r.ledger.live_bytes : r.iterations.back().live_after_bytes;
  fix.live_growth_per_iteration = LiveGrowthPerIteration(r);
  if (r.outcome.kind == Outcome::kError) fix.error = r.error;
  return fix;
}

}  // namespace

void MeasureFixes(const VariantSpec& spec, const VariantMeasureOptions& options, VariantMeasurement* m) {
  std::map<std::string, MeasuredFix> measured;  // a fix that serves two diagnoses runs once
  for (Diagnosis& d : m->diagnoses) {
    const std::vector<Candidate> candidates =
        spec.workload.empty() ? CatalogLoopFixes(d.kind, spec, *m) : WorkloadFixes(d.kind, spec);
    for (const Candidate& c : candidates) {
      auto it = measured.find(c.fix);
      if (it == measured.end()) it = measured.emplace(c.fix, Rerun(c, options)).first;
      d.measured.push_back(it->second);
    }
    // Best first: a fix that passes before one that does not, then the lower peak.
    std::stable_sort(d.measured.begin(), d.measured.end(), [](const MeasuredFix& a, const MeasuredFix& b) {
      const bool a_pass = a.outcome == "pass", b_pass = b.outcome == "pass";
      if (a_pass != b_pass) return a_pass;
      return a.peak_bytes < b.peak_bytes;
    });
  }
}

}  // namespace oomguard
