// A fixed RunResults for the report writers' golden tests: no machine, time or version enters it.
// It has a passing scenario with a baseline (unchanged and improved variants), a failing scenario
// whose name needs escaping in every format (`bad&name<"x">`) with a regression and a failed check,
// an unresolved file and an unsupported scenario. Diagnoses: the pitfall variant has one with a measured
// fix and one without an event; the regressed variant has advice whose words need escaping and whose
// measured fix ran out of memory. The fixed variant is rank 0 of 2 under fsdp with bf16 gathers and
// float32 reduce-scatters; the new one rank 3 of 4 under zero2 with float32 master weights.
#pragma once

#include "model/run_results.h"

namespace oomguard::testing {

inline VariantMeasurement SampleMeasurement(const std::string& variant, int64_t scale) {
  VariantMeasurement m;
  m.variant = variant;
  m.backend = "cpu";
  m.card = "NVIDIA T4 16GB";
  m.cap_bytes = 15381561344;
  m.duration_ms = 250;
  m.ledger.peak_bytes = 9 * 1048576 * scale;
  m.ledger.peak_phase = "backward";
  m.ledger.alloc_count = 120;
  m.ledger.allocated_bytes_total = 40 * 1048576 * scale;
  m.ledger.phase_peaks = {{"setup", 1048576},
                          {"forward", 5 * 1048576 * scale},
                          {"backward", 9 * 1048576 * scale},
                          {"optimizer", 3 * 1048576}};
  m.ledger.peak_by_origin = {{"setup", 1048576}, {"forward", (9 * scale - 2) * 1048576}, {"backward", 1048576}};
  m.ledger.timeline_stride = 1;
  m.ledger.timeline = {{0, 1048576}, {10, 3 * 1048576 * scale}, {20, 9 * 1048576 * scale}, {30, 2 * 1048576}};
  m.ledger.phase_marks = {{0, "setup"}, {5, "forward"}, {15, "backward"}, {25, "optimizer"}};
  m.iterations = {{9 * 1048576 * scale, 4 * 1048576, 2 * 1048576}, {9 * 1048576 * scale, 4 * 1048576, 2 * 1048576}};
  m.forward_saved_bytes = 3 * 1048576 * scale;
  m.grad_bytes = 1048576;
  m.optimizer_state_bytes = 0;
  m.grad_digest = "0123456789abcdef";
  return m;
}

inline RunResults SampleReport() {
  RunResults report;
  report.backend = "cpu";
  report.duration_ms = 4200;
  report.compared_with_baselines = true;
  report.oomguard_version = "0.0.0-test";
  report.libtorch_version = "2.11.0";
  report.children = "forked";

  ScenarioResult pass;
  pass.name = "forgotten-no-grad";
  pass.file = "scenarios/forgotten-no-grad.json";
  pass.summary = "An evaluation loop without no_grad keeps every batch's autograd graph alive";
  pass.backend = "cpu";
  pass.card = "NVIDIA T4 16GB";
  pass.cap_bytes = 15381561344;
  pass.code = ResultCode::kPass;
  pass.duration_ms = 1500;
  VariantResult pitfall;
  pitfall.name = "pitfall";
  pitfall.code = ResultCode::kPass;
  pitfall.measurement = SampleMeasurement("pitfall", 3);
  pitfall.baseline = {BaselineVerdict::kUnchanged,
                      {{"peak_bytes", 27 * 1048576, 27 * 1048576, 0, 0.0, BaselineVerdict::kUnchanged}},
                      "scenarios/baselines/forgotten-no-grad.json"};
  VariantResult fixed;
  fixed.name = "fixed";
  fixed.code = ResultCode::kPass;
  fixed.measurement = SampleMeasurement("fixed", 1);
  fixed.baseline = {BaselineVerdict::kImproved,
                    {{"peak_bytes", 10 * 1048576, 9 * 1048576, -1048576, -10.0, BaselineVerdict::kImproved}},
                    "scenarios/baselines/forgotten-no-grad.json"};
  Diagnosis kept;
  kept.kind = DiagnosisKind::kEvalKeepsGraph;
  kept.bytes = 18 * 1048576;
  kept.per = DiagnosisPer::kPhaseEnd;
  kept.count = 64;
  kept.phase = "eval";
  kept.where = "fc2";
  kept.message = "64 tensors with a grad function made in eval are alive at its end (18.00 MiB)";
  kept.fix = "run the evaluation under torch::NoGradGuard";
  kept.event_index = 10;
  kept.measured = {{"loop.eval.no_grad: true", "pass", 9 * 1048576, 1048576, 0.0, ""}};
  Diagnosis retained;
  retained.kind = DiagnosisKind::kRetainedGrad;
  retained.bytes = 2 * 1048576;
  retained.per = DiagnosisPer::kOnce;
  retained.count = 4;
  retained.phase = "backward";
  retained.message = "4 non-leaf tensors hold a .grad after backward (2.00 MiB)";
  retained.fix = "call retain_grad() only on the tensors you inspect";
  pitfall.measurement->diagnosed = true;
  pitfall.measurement->diagnoses = {kept, retained};
  // The caching allocator's model, whose verdict it was (--verdict reserved): 27 MiB of tensors in
  // 40 MiB of segments.
  pitfall.measurement->cuda_model = CudaModelMeasurement{28 * 1048576, 40 * 1048576, 27 * 1048576, 3, 1, 0, true};
  fixed.measurement->diagnosed = true;  // watched, nothing found
  // One rank of an fsdp run under FSDP2's MixedPrecisionPolicy (Note [FSDP2 mixed precision]): every
  // format names the rank, the strategy and the precision.
  fixed.measurement->parallel =
      ParallelMeasurement{2, 0, "fsdp", 3 * 1048576, {2 * 1048576, 1048576}, false, "bfloat16", "float32", false};
  pass.variants = {pitfall, fixed};
  pass.checks = {{"pitfall.phase_peak.eval >= 3 * fixed.phase_peak.eval", true, true, false,
                  "pitfall.phase_peak.eval >= 3 * fixed.phase_peak.eval: 27.00 MiB >= 3 * 9.00 MiB (27.00 MiB)"}};

  ScenarioResult fail;
  fail.name = "bad&name<\"x\">";
  fail.file = "scenarios/bad&name.json";
  fail.summary = "Escaping: <b>not bold</b> & \"quoted\"";
  fail.backend = "cpu";
  fail.card = "NVIDIA T4 16GB";
  fail.cap_bytes = 15381561344;
  fail.code = ResultCode::kFail;
  fail.duration_ms = 900;
  VariantResult regressed;
  regressed.name = "a<b>&c";
  regressed.code = ResultCode::kFail;
  regressed.measurement = SampleMeasurement("a<b>&c", 2);
  regressed.reasons = {"regression: peak_bytes 18.00 MiB vs baseline 16.20 MiB (+1.80 MiB, +11.11%)",
                       "check failed: peak <= 16MiB: 18.00 MiB <= 16MiB"};
  regressed.baseline = {BaselineVerdict::kRegressed,
                        {{"peak_bytes", 16986931, 18874368, 1887437, 11.111, BaselineVerdict::kRegressed},
                         {"phase_peak.backward", 16986931, 18874368, 1887437, 11.111, BaselineVerdict::kRegressed}},
                        "scenarios/baselines/bad&name.json"};
  Diagnosis advice;
  advice.kind = DiagnosisKind::kActivationsDominate;
  advice.bytes = 13 * 1048576;
  advice.per = DiagnosisPer::kPeak;
  advice.phase = "forward";
  advice.where = "blocks.<0>&|1|";
  advice.message = "activations are 72% of the peak: <b>13.00 MiB</b> | \"saved\" & kept";
  advice.fix = "checkpoint segments, bf16 autocast or a smaller batch";
  advice.event_index = 20;
  advice.measured = {{"autocast: bf16", "pass", 12 * 1048576, 2 * 1048576, 4096.0, ""},
                     {"batch: 32, accumulate: 2", "oom", 20 * 1048576, 0, std::nullopt, ""}};
  regressed.measurement->diagnosed = true;
  regressed.measurement->diagnoses = {advice};
  VariantResult fresh;
  fresh.name = "new_variant";
  fresh.code = ResultCode::kPass;
  fresh.measurement = SampleMeasurement("new_variant", 1);
  fresh.baseline = {BaselineVerdict::kNew, {}, "scenarios/baselines/bad&name.json"};
  // The last rank of a zero2 run whose optimizer steps float32 masters (Note [Master weights]).
  fresh.measurement->parallel = ParallelMeasurement{4, 3, "zero2", 0, {}, false, "", "", true};
  fail.variants = {regressed, fresh};
  fail.checks = {{"a.peak > 2 * new_variant.peak", true, false, false,
                  "a.peak > 2 * new_variant.peak: 18.00 MiB > 2 * 9.00 MiB (18.00 MiB)"}};

  ScenarioResult unresolved;
  unresolved.name = "broken";
  unresolved.file = "scenarios/broken.json";
  unresolved.backend = "cpu";
  unresolved.code = ResultCode::kUnresolved;
  unresolved.error = "scenarios/broken.json:3:14: JSON syntax error: unexpected 'o'";

  ScenarioResult unsupported;
  unsupported.name = "gpu-only";
  unsupported.file = "scenarios/gpu-only.json";
  unsupported.backend = "cpu";
  unsupported.code = ResultCode::kUnsupported;
  unsupported.error = "runs on cuda, not cpu";

  report.scenarios = {pass, fail, unresolved, unsupported};
  return report;
}

// A report whose strings hold what XML 1.0 cannot carry and what Markdown would render as markup.
inline RunResults HostileReport() {
  RunResults report = SampleReport();
  report.scenarios.resize(1);
  ScenarioResult& s = report.scenarios[0];
  s.name = "ctl\x01\x1b name\xff";
  s.code = ResultCode::kFail;
  s.variants.resize(1);
  VariantResult& v = s.variants[0];
  v.name = "x|y`z*_\n<b>&$\xc3\xa9";
  v.code = ResultCode::kFail;
  v.reasons = {"line1\nline2\ttab\r|pipe", "second"};
  return report;
}

}  // namespace oomguard::testing
