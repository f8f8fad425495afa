#include "model/measurement_json.h"

#include <stdexcept>

#include "model/rank_measurement_json.h"

namespace oomguard {

using nlohmann::json;

namespace {

// Not measured is null, never 0.
json Optional(const std::optional<int64_t>& value) { return value ? json(*value) : json(nullptr); }
std::optional<int64_t> OptionalFrom(const json& j) {
  return j.is_null() ? std::nullopt : std::optional<int64_t>(j.get<int64_t>());
}

json FixToJson(const MeasuredFix& f) {
  return {
      {"fix", f.fix},
      {"outcome", f.outcome},
      {"peak_bytes", f.peak_bytes},
      {"live_after_bytes", f.live_after_bytes},
      {"live_growth_per_iteration", f.live_growth_per_iteration ? json(*f.live_growth_per_iteration) : json(nullptr)},
      {"error", f.error}};
}

// fix_peak_bytes and fix_live_after_bytes are the best measured fix's, the first that passed (null: none
// measured or passed), for a reader that wants one number; fixes_measured has each fix tried.
json DiagnosisToJson(const Diagnosis& d) {
  json fixes = json::array();
  for (const MeasuredFix& f : d.measured) fixes.push_back(FixToJson(f));
  const MeasuredFix* best = nullptr;
  for (const MeasuredFix& f : d.measured) {
    if (best == nullptr && f.outcome == "pass") best = &f;
  }
  return {{"kind", Name(d.kind)},
          {"severity", Severity(d.kind)},
          {"bytes", d.bytes},
          {"per", Name(d.per)},
          {"count", d.count},
          {"phase", d.phase},
          {"where", d.where},
          {"message", d.message},
          {"fix", d.fix},
          {"fix_peak_bytes", best ? json(best->peak_bytes) : json(nullptr)},
          {"fix_live_after_bytes", best ? json(best->live_after_bytes) : json(nullptr)},
          {"fixes_measured", fixes},
          {"event_index", d.event_index}};
}

Diagnosis DiagnosisFromJson(const json& j) {
  Diagnosis d;
  const std::string kind = j.at("kind").get<std::string>();
  if (!Parse(kind, &d.kind)) throw std::invalid_argument("unknown diagnosis kind '" + kind + "'");
  const std::string per = j.at("per").get<std::string>();
  if (!Parse(per, &d.per)) throw std::invalid_argument("unknown diagnosis per '" + per + "'");
  d.bytes = j.at("bytes").get<int64_t>();
  d.count = j.at("count").get<int64_t>();
  d.phase = j.at("phase").get<std::string>();
  d.where = j.at("where").get<std::string>();
  d.message = j.at("message").get<std::string>();
  d.fix = j.at("fix").get<std::string>();
  d.event_index = j.at("event_index").get<int64_t>();
  for (const json& f : j.at("fixes_measured")) {
    MeasuredFix fix{f.at("fix").get<std::string>(),
                    f.at("outcome").get<std::string>(),
                    f.at("peak_bytes").get<int64_t>(),
                    f.at("live_after_bytes").get<int64_t>(),
                    std::nullopt,
                    f.value("error", "")};  // absent in results written before it was
    const json& growth = f.at("live_growth_per_iteration");
    if (!growth.is_null()) fix.live_growth_per_iteration = growth.get<double>();
    d.measured.push_back(std::move(fix));
  }
  return d;
}

// The rank a measurement is (scenario `parallel`), and its buffers for collectives.
json ParallelToJson(const ParallelMeasurement& p) {
  json j = {{"world", p.world}, {"rank", p.rank}, {"strategy", p.strategy}};
  j["communication_bytes"] = p.communication_bytes;
  j["bucket_bytes"] = p.bucket_bytes;
  if (p.buckets_are_gradients) j["buckets_are_gradients"] = true;  // absent when false, as in older files
  // The precision, absent where the rank ran at its model's dtype alone (as in older files).
  if (!p.param_dtype.empty()) j["param_dtype"] = p.param_dtype;
  if (!p.reduce_dtype.empty()) j["reduce_dtype"] = p.reduce_dtype;
  if (p.master_weights) j["master_weights"] = true;
  return j;
}

}  // namespace

json MeasurementToJson(const VariantMeasurement& m) {
  json j;
  j["variant"] = m.variant;
  j["backend"] = m.backend;
  j["card"] = m.card;
  j["cap_bytes"] = m.cap_bytes;
  j["outcome"] = Name(m.outcome);
  j["error"] = m.error;
  j["attention"] = m.attention;
  j["kernels"] = m.kernels;
  j["duration_ms"] = m.duration_ms;
  j["peak_bytes"] = m.ledger.peak_bytes;
  j["peak_phase"] = m.ledger.peak_phase;
  j["live_bytes_at_end"] = m.ledger.live_bytes;
  j["alloc_count"] = m.ledger.alloc_count;
  j["allocated_bytes_total"] = m.ledger.allocated_bytes_total;
  j["failed_allocations"] = m.ledger.failed_count;
  json phases = json::array();
  for (const PhasePeak& p : m.ledger.phase_peaks) phases.push_back({{"phase", p.phase}, {"peak_bytes", p.peak_bytes}});
  j["phase_peaks"] = phases;
  json origins = json::array();
  for (const PhasePeak& p : m.ledger.peak_by_origin) origins.push_back({{"phase", p.phase}, {"bytes", p.peak_bytes}});
  j["live_at_peak_by_origin"] = origins;
  if (m.cuda) {
    const CudaMeasurement& c = *m.cuda;
    j["cuda"] = {{"allocated_peak_bytes", c.allocated_peak_bytes},
                 {"reserved_peak_bytes", c.reserved_peak_bytes},
                 {"active_peak_bytes", c.active_peak_bytes},
                 {"requested_peak_bytes", c.requested_peak_bytes},
                 {"fragmentation_at_peak_bytes", c.reserved_peak_bytes - c.allocated_peak_bytes},
                 {"alloc_retries", c.alloc_retries},
                 {"ooms", c.ooms},
                 {"allocated_at_start_bytes", c.allocated_at_start_bytes},
                 {"reserved_at_start_bytes", c.reserved_at_start_bytes},
                 {"timed_transfers", c.timed_transfers},
                 {"transfer_ms", c.transfer_ms}};
    json phases_json = json::array();
    for (const CudaPhaseMeasurement& p : c.phases) {
      phases_json.push_back({{"phase", p.phase},
                             {"allocated_peak_bytes", p.allocated_bytes},
                             {"reserved_peak_bytes", p.reserved_bytes},
                             {"active_peak_bytes", p.active_bytes},
                             {"requested_peak_bytes", p.requested_bytes}});
    }
    j["cuda"]["phases"] = phases_json;
  }
  json iterations = json::array();
  for (const IterationMeasurement& it : m.iterations) {
    iterations.push_back({{"peak_bytes", it.peak_bytes},
                          {"live_after_backward_bytes", it.live_after_backward_bytes},
                          {"live_after_bytes", it.live_after_bytes}});
  }
  j["iterations"] = iterations;
  if (m.iterations_left_out > 0) j["iterations_left_out"] = m.iterations_left_out;
  j["transfers"] = m.transfers;
  j["transfer_bytes"] = m.transfer_bytes;
  j["param_bytes"] = m.param_bytes;
  j["grad_bytes"] = Optional(m.grad_bytes);
  j["optimizer_state_bytes"] = Optional(m.optimizer_state_bytes);
  j["forward_saved_bytes"] = Optional(m.forward_saved_bytes);
  j["clip_grad_norm_bytes"] = Optional(m.clip_grad_norm_bytes);
  j["retained_grad_bytes"] = Optional(m.retained_grad_bytes);
  j["grad_digest"] = m.grad_digest;
  json timeline = json::array();
  for (const TimelinePoint& p : m.ledger.timeline) timeline.push_back({p.event_index, p.live_bytes});
  json marks = json::array();
  for (const PhaseMark& p : m.ledger.phase_marks) marks.push_back({p.event_index, p.phase});
  j["timeline"] = {{"stride", m.ledger.timeline_stride}, {"points", timeline}, {"phases", marks}};
  // Note [Thinned phase marks], allocators/ledger.h: written only when marks were thinned out.
  if (m.ledger.phase_marks_recorded > static_cast<int64_t>(m.ledger.phase_marks.size()))
    j["timeline"]["phases_recorded"] = m.ledger.phase_marks_recorded;
  if (m.oom) {
    const OomDetail& o = *m.oom;
    json layers = json::array();
    for (const auto& [name, bytes] : o.live.layers) layers.push_back({{"layer", name}, {"bytes", bytes}});
    j["oom"] = {{"phase", o.phase},
                {"requested_bytes", o.requested_bytes},
                {"cap_bytes", o.cap_bytes},
                {"live_bytes", o.live_bytes},
                {"injected", o.injected},
                {"message", o.message},
                {"live",
                 {{"parameters_bytes", o.live.parameters_bytes},
                  {"gradients_bytes", o.live.gradients_bytes},
                  {"optimizer_state_bytes", o.live.optimizer_state_bytes},
                  {"inputs_bytes", o.live.inputs_bytes},
                  {"activations_and_transient_bytes", o.live.activations_and_transient_bytes},
                  {"layers", layers}}}};
    // One rank's buffers for collectives (scenario `parallel`): absent when none, as in older files.
    if (o.live.communication_bytes > 0) j["oom"]["live"]["communication_bytes"] = o.live.communication_bytes;
  }
  json injected = json::array();
  for (const InjectedFailure& f : m.injected) {
    injected.push_back(
        {{"allocation_index", f.allocation_index}, {"bytes", f.bytes}, {"phase", f.phase}, {"policy", f.policy}});
  }
  j["injected_failures"] = injected;
  if (m.injection) j["injection"] = {{"spec", m.injection->spec}, {"requests_seen", m.injection->requests_seen}};
  if (!m.snapshot.empty()) j["snapshot"] = m.snapshot;
  if (!m.snapshot_error.empty()) j["snapshot_error"] = m.snapshot_error;
  if (m.module) {
    const ModuleMeasurement& mod = *m.module;
    j["module"] = {{"file", mod.file},
                   {"weights", mod.weights},
                   {"graph_optimization", mod.graph_optimization},
                   {"segments", mod.segments},
                   {"output", mod.output}};
  }
  if (!m.warnings.empty()) j["warnings"] = m.warnings;
  if (!m.steady_state.empty()) {
    j["steady_state"] = {{"note", m.steady_state}, {"iterations_raised", m.iterations_raised}};
  }
  if (m.diagnosed) {
    json diagnoses = json::array();
    for (const Diagnosis& d : m.diagnoses) diagnoses.push_back(DiagnosisToJson(d));
    j["diagnoses"] = diagnoses;
  }
  if (m.parallel) j["parallel"] = ParallelToJson(*m.parallel);
  if (!m.ranks.empty()) j["ranks"] = RanksToJson(m.ranks);  // real ranks only: other files stay as they were
  if (m.screen) j["screen"] = {{"cause", m.screen->cause}, {"watch_ms", m.screen->watch_ms}};
  if (m.cuda_model) {
    const CudaModelMeasurement& c = *m.cuda_model;
    j["cuda_model"] = {{"allocated_peak_bytes", c.allocated_peak_bytes},
                       {"reserved_peak_bytes", c.reserved_peak_bytes},
                       {"requested_peak_bytes", c.requested_peak_bytes},
                       {"segments_peak", c.segments_peak},
                       {"alloc_retries", c.alloc_retries},
                       {"ooms", c.ooms},
                       {"decides", c.decides}};
    // Only where something was held (card mode): other runs' JSON stays as it was.
    if (c.allocated_at_start_bytes > 0 || c.reserved_at_start_bytes > 0) {
      j["cuda_model"]["allocated_at_start_bytes"] = c.allocated_at_start_bytes;
      j["cuda_model"]["reserved_at_start_bytes"] = c.reserved_at_start_bytes;
    }
  }
  return j;
}

bool MeasurementFromJson(const json& j, VariantMeasurement* m, std::string* error) {
  try {
    m->variant = j.at("variant").get<std::string>();
    m->backend = j.at("backend").get<std::string>();
    m->card = j.at("card").get<std::string>();
    m->cap_bytes = j.at("cap_bytes").get<int64_t>();
    const std::string outcome = j.at("outcome").get<std::string>();
    if (!Parse(outcome, &m->outcome)) {
      *error = "malformed measurement: unknown outcome '" + outcome + "'";
      return false;
    }
    m->error = j.at("error").get<std::string>();
    m->attention = j.at("attention").get<std::string>();
    m->kernels = j.value("kernels", "cpu");  // absent in results written before it was
    m->duration_ms = j.at("duration_ms").get<double>();
    m->ledger.peak_bytes = j.at("peak_bytes").get<int64_t>();
    m->ledger.peak_phase = j.at("peak_phase").get<std::string>();
    m->ledger.live_bytes = j.at("live_bytes_at_end").get<int64_t>();
    m->ledger.alloc_count = j.at("alloc_count").get<int64_t>();
    m->ledger.allocated_bytes_total = j.at("allocated_bytes_total").get<int64_t>();
    m->ledger.failed_count = j.at("failed_allocations").get<int64_t>();
    for (const json& p : j.at("phase_peaks")) {
      m->ledger.phase_peaks.push_back({p.at("phase").get<std::string>(), p.at("peak_bytes").get<int64_t>()});
    }
    if (j.contains("cuda")) {
      const json& c = j.at("cuda");
      m->cuda = CudaMeasurement{c.at("allocated_peak_bytes").get<int64_t>(),
                                c.at("reserved_peak_bytes").get<int64_t>(),
                                c.at("active_peak_bytes").get<int64_t>(),
                                c.at("requested_peak_bytes").get<int64_t>(),
                                c.at("alloc_retries").get<int64_t>(),
                                c.at("ooms").get<int64_t>(),
                                {}};
      // Absent from results written before they were measured.
      m->cuda->allocated_at_start_bytes = c.value("allocated_at_start_bytes", int64_t{0});
      m->cuda->reserved_at_start_bytes = c.value("reserved_at_start_bytes", int64_t{0});
      m->cuda->timed_transfers = c.value("timed_transfers", int64_t{0});
      m->cuda->transfer_ms = c.value("transfer_ms", 0.0);
      for (const json& p : c.at("phases")) {
        m->cuda->phases.push_back({p.at("phase").get<std::string>(), p.at("allocated_peak_bytes").get<int64_t>(),
                                   p.at("reserved_peak_bytes").get<int64_t>(), p.at("active_peak_bytes").get<int64_t>(),
                                   p.at("requested_peak_bytes").get<int64_t>()});
      }
    }
    if (j.contains("live_at_peak_by_origin")) {  // absent in results written before it existed
      for (const json& p : j.at("live_at_peak_by_origin")) {
        m->ledger.peak_by_origin.push_back({p.at("phase").get<std::string>(), p.at("bytes").get<int64_t>()});
      }
    }
    for (const json& it : j.at("iterations")) {
      m->iterations.push_back({it.at("peak_bytes").get<int64_t>(), it.at("live_after_backward_bytes").get<int64_t>(),
                               it.at("live_after_bytes").get<int64_t>()});
    }
    if (j.contains("iterations_left_out")) m->iterations_left_out = j.at("iterations_left_out").get<int64_t>();
    m->transfers = j.at("transfers").get<int64_t>();
    m->transfer_bytes = j.at("transfer_bytes").get<int64_t>();
    m->param_bytes = j.at("param_bytes").get<int64_t>();
    m->grad_bytes = OptionalFrom(j.at("grad_bytes"));
    m->optimizer_state_bytes = OptionalFrom(j.at("optimizer_state_bytes"));
    m->forward_saved_bytes = OptionalFrom(j.at("forward_saved_bytes"));
    m->retained_grad_bytes = OptionalFrom(j.at("retained_grad_bytes"));
    if (j.contains("clip_grad_norm_bytes")) m->clip_grad_norm_bytes = OptionalFrom(j.at("clip_grad_norm_bytes"));
    m->grad_digest = j.at("grad_digest").get<std::string>();
    const json& timeline = j.at("timeline");
    m->ledger.timeline_stride = timeline.at("stride").get<int64_t>();
    for (const json& p : timeline.at("points"))
      m->ledger.timeline.push_back({p.at(0).get<int64_t>(), p.at(1).get<int64_t>()});
    for (const json& p : timeline.at("phases")) {
      m->ledger.phase_marks.push_back({p.at(0).get<int64_t>(), p.at(1).get<std::string>()});
    }
    m->ledger.phase_marks_recorded = timeline.contains("phases_recorded")
                                         ? timeline.at("phases_recorded").get<int64_t>()
                                         : static_cast<int64_t>(m->ledger.phase_marks.size());
    if (j.contains("oom")) {
      const json& o = j.at("oom");
      OomDetail report;
      report.phase = o.at("phase").get<std::string>();
      report.requested_bytes = o.at("requested_bytes").get<int64_t>();
      report.cap_bytes = o.at("cap_bytes").get<int64_t>();
      report.live_bytes = o.at("live_bytes").get<int64_t>();
      report.injected = o.at("injected").get<bool>();
      report.message = o.at("message").get<std::string>();
      const json& live = o.at("live");
      report.live.parameters_bytes = live.at("parameters_bytes").get<int64_t>();
      report.live.gradients_bytes = live.at("gradients_bytes").get<int64_t>();
      report.live.optimizer_state_bytes = live.at("optimizer_state_bytes").get<int64_t>();
      report.live.inputs_bytes = live.at("inputs_bytes").get<int64_t>();
      report.live.activations_and_transient_bytes = live.at("activations_and_transient_bytes").get<int64_t>();
      report.live.communication_bytes = live.value("communication_bytes", int64_t{0});
      for (const json& l : live.at("layers")) {
        report.live.layers.emplace_back(l.at("layer").get<std::string>(), l.at("bytes").get<int64_t>());
      }
      m->oom = report;
    }
    for (const json& f : j.at("injected_failures")) {
      m->injected.push_back({f.at("allocation_index").get<int64_t>(), f.at("bytes").get<int64_t>(),
                             f.at("phase").get<std::string>(), f.at("policy").get<std::string>()});
    }
    if (j.contains("injection")) {
      m->injection = VariantMeasurement::Injection{j.at("injection").at("spec").get<std::string>(),
                                                   j.at("injection").at("requests_seen").get<int64_t>()};
    }
    m->snapshot = j.value("snapshot", "");
    m->snapshot_error = j.value("snapshot_error", "");
    if (j.contains("module")) {
      const json& mod = j.at("module");
      m->module = ModuleMeasurement{mod.at("file").get<std::string>(), mod.at("weights").get<std::string>(),
                                    mod.at("graph_optimization").get<bool>(), mod.at("segments").get<int64_t>(),
                                    mod.at("output").get<std::string>()};
    }
    if (j.contains("warnings")) m->warnings = j.at("warnings").get<std::vector<std::string>>();
    if (j.contains("steady_state")) {
      m->steady_state = j.at("steady_state").at("note").get<std::string>();
      m->iterations_raised = j.at("steady_state").at("iterations_raised").get<bool>();
    }
    if (j.contains("diagnoses")) {  // absent: the detectors did not watch the run (or an older file)
      m->diagnosed = true;
      for (const json& d : j.at("diagnoses")) m->diagnoses.push_back(DiagnosisFromJson(d));
    }
    if (j.contains("parallel")) {
      const json& p = j.at("parallel");
      m->parallel = ParallelMeasurement{p.at("world").get<int64_t>(),
                                        p.at("rank").get<int64_t>(),
                                        p.at("strategy").get<std::string>(),
                                        p.at("communication_bytes").get<int64_t>(),
                                        p.at("bucket_bytes").get<std::vector<int64_t>>(),
                                        p.value("buckets_are_gradients", false),
                                        p.value("param_dtype", ""),
                                        p.value("reduce_dtype", ""),
                                        p.value("master_weights", false)};
    }
    if (j.contains("ranks")) m->ranks = RanksFromJson(j.at("ranks"));
    if (j.contains("screen")) {
      const json& screen = j.at("screen");
      m->screen =
          VariantMeasurement::Screen{screen.at("cause").get<std::string>(), screen.at("watch_ms").get<double>()};
    }
    if (j.contains("cuda_model")) {
      const json& c = j.at("cuda_model");
      m->cuda_model =
          CudaModelMeasurement{c.at("allocated_peak_bytes").get<int64_t>(), c.at("reserved_peak_bytes").get<int64_t>(),
                               c.at("requested_peak_bytes").get<int64_t>(), c.at("segments_peak").get<int64_t>(),
                               c.at("alloc_retries").get<int64_t>(),        c.at("ooms").get<int64_t>(),
                               c.value("decides", false),
                               c.value("allocated_at_start_bytes", int64_t{0}),
                               c.value("reserved_at_start_bytes", int64_t{0})};
    }
  } catch (const json::exception& e) {
    *error = std::string("malformed measurement: ") + e.what();
    return false;
  } catch (const std::invalid_argument& e) {
    *error = std::string("malformed measurement: ") + e.what();
    return false;
  }
  return true;
}

}  // namespace oomguard
