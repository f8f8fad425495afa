#include "baselines/baseline_store.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/files.h"
#include "base/json_text.h"
#include "model/backend.h"
#include "model/enum_names.h"
#include "model/metric_names.h"
#include "scenario/json_diagnostics.h"
#include "scenario/json_document.h"

namespace oomguard {

using nlohmann::json;

int64_t Tolerance::Allowed(int64_t baseline) const {
  const double share = std::floor(relative * static_cast<double>(baseline));
  // 2^63 is the first double past int64's range; a cast beyond it would be undefined.
  const int64_t relative_bytes =
      share >= 9223372036854775808.0 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(share);
  return std::max(absolute_bytes, relative_bytes);
}

const BaselineEntry* BaselineFile::Find(const std::string& variant, const std::string& backend, int64_t cap_bytes,
                                        const std::string& kernels, const std::string& parallel) const {
  for (const BaselineEntry& e : entries) {
    if (e.variant == variant && e.backend == backend && e.cap_bytes == cap_bytes && e.kernels == kernels &&
        e.parallel == parallel) {
      return &e;
    }
  }
  return nullptr;
}

void BaselineFile::Put(BaselineEntry entry) {
  for (BaselineEntry& e : entries) {
    if (e.variant == entry.variant && e.backend == entry.backend && e.cap_bytes == entry.cap_bytes &&
        e.kernels == entry.kernels && e.parallel == entry.parallel) {
      e = std::move(entry);
      return;
    }
  }
  entries.push_back(std::move(entry));
}

const Tolerance& BaselineFile::ToleranceFor(const std::string& metric) const {
  auto it = metric_tolerances.find(metric);
  return it == metric_tolerances.end() ? tolerance : it->second;
}

std::string BaselinePath(const std::string& dir, const std::string& scenario) { return dir + "/" + scenario + ".json"; }

std::string BaselineDirectory(const std::string& baselines_dir, const std::string& scenario_file) {
  if (!baselines_dir.empty()) return baselines_dir;
  const size_t slash = scenario_file.find_last_of('/');
  return (slash == std::string::npos ? std::string(".") : scenario_file.substr(0, slash)) + "/baselines";
}

namespace {

json ToleranceToJson(const Tolerance& t) { return {{"relative", t.relative}, {"absolute_bytes", t.absolute_bytes}}; }

// A metric a tolerance may name: the ones CompareWithBaseline compares (baseline_diff.cpp).
bool IsComparedMetric(const std::string& metric) {
  if (metric == "peak_bytes" || metric == "alloc_count") return true;
  if (metric.starts_with("phase_peak.")) {
    const std::string phase = metric.substr(11);
    return std::find(kMetricPhases.begin(), kMetricPhases.end(), phase) != kMetricPhases.end();
  }
  if (metric.starts_with("live_after[") && metric.ends_with("]") && metric.size() > 12) {
    const std::string n = metric.substr(11, metric.size() - 12);
    return n.size() <= 9 && n.find_first_not_of("0123456789") == std::string::npos && n[0] != '0';
  }
  if (metric.starts_with("rank_peak[") && metric.ends_with("]") && metric.size() > 11) {  // from rank 0
    const std::string n = metric.substr(10, metric.size() - 11);
    return n.size() <= 9 && n.find_first_not_of("0123456789") == std::string::npos && (n == "0" || n[0] != '0');
  }
  return false;
}

// Any string, "" included (a baseline of a plain --cap has no card name).
FieldReader AnyStringField(std::string* out) {
  return [out](const OrderedJson& v, const JsonPath& p, std::string* e) {
    if (!v.is_string()) return Fail(p, "expected a string, got " + DescribeJson(v), e);
    *out = v.get<std::string>();
    return true;
  };
}

// relative: a fraction of the baseline value, [0, 100]; absolute_bytes: >= 0. `metrics`, when given,
// takes the per-metric tolerances, which have no "metrics" of their own.
FieldReader ToleranceField(Tolerance* out, std::map<std::string, Tolerance>* metrics) {
  return [out, metrics](const OrderedJson& value, const JsonPath& path, std::string* error) {
    std::vector<Field> fields = {{"relative", NumberField(&out->relative, "a fraction in [0, 100] (0.01 is 1%)",
                                                          [](double r) { return r >= 0 && r <= 100; })},
                                 {"absolute_bytes", IntField(&out->absolute_bytes, 0)}};
    if (metrics != nullptr) {
      fields.push_back({"metrics", [metrics](const OrderedJson& v, const JsonPath& p, std::string* e) {
                          if (!v.is_object())
                            return Fail(p, "expected an object of metric tolerances, got " + DescribeJson(v), e);
                          for (const auto& [metric, t] : v.items()) {
                            if (!IsComparedMetric(metric)) {
                              return Fail(p,
                                          "unknown metric " + Quoted(metric) +
                                              " (a baseline compares peak_bytes, alloc_count, "
                                              "phase_peak.<phase>, live_after[N] and rank_peak[R])",
                                          e);
                            }
                            if (!ToleranceField(&(*metrics)[metric], nullptr)(t, p.Key(metric), e)) return false;
                          }
                          return true;
                        }});
    }
    return ReadFields(value, path, fields, /*allow_null=*/false, error);
  };
}

// An array of byte counts >= 0, one per `each` (an iteration, a rank).
FieldReader BytesArrayField(std::vector<int64_t>* out, const std::string& each) {
  return [out, each](const OrderedJson& v, const JsonPath& p, std::string* e) {
    if (!v.is_array()) return Fail(p, "expected an array of bytes per " + each + ", got " + DescribeJson(v), e);
    out->assign(v.size(), 0);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!IntField(&(*out)[i], 0)(v[i], p.Index(static_cast<int64_t>(i)), e)) return false;
    }
    return true;
  };
}

FieldReader EntryField(BaselineEntry* out) {
  return [out](const OrderedJson& value, const JsonPath& path, std::string* error) {
    const std::vector<std::string> backends = AllNames<Backend>();
    const std::vector<Field> fields = {
        {"variant", StringField(&out->variant)},
        {"backend", EnumField(&out->backend, "backend", backends)},
        {"card", AnyStringField(&out->card)},
        {"kernels", AnyStringField(&out->kernels)},
        {"parallel", AnyStringField(&out->parallel)},
        {"cap_bytes", IntField(&out->cap_bytes, 1)},
        {"peak_bytes", IntField(&out->peak_bytes, 0)},
        {"phase_peaks",
         [out](const OrderedJson& v, const JsonPath& p, std::string* e) {
           if (!v.is_object()) return Fail(p, "expected an object of phase peaks, got " + DescribeJson(v), e);
           for (const auto& [phase, bytes] : v.items()) {
             if (std::find(kMetricPhases.begin(), kMetricPhases.end(), phase) == kMetricPhases.end()) {
               return Fail(p, UnknownNameMessage("phase", phase, kMetricPhases, "phases"), e);
             }
             if (!IntField(&out->phase_peaks[phase], 0)(bytes, p.Key(phase), e)) return false;
           }
           return true;
         }},
        {"live_after", BytesArrayField(&out->live_after, "iteration")},
        {"alloc_count", IntField(&out->alloc_count, 0)},
        {"rank_peaks", BytesArrayField(&out->rank_peaks, "rank")}};
    if (!ReadFields(value, path, fields, /*allow_null=*/false, error)) return false;
    for (const char* key :
         {"variant", "backend", "cap_bytes", "peak_bytes", "phase_peaks", "live_after", "alloc_count"}) {
      if (!value.contains(key)) return Fail(path, std::string("missing required key \"") + key + "\"", error);
    }
    return true;
  };
}

// Ends every message about a baseline file's content.
constexpr const char* kBaselineExpected = " (a baseline file as --update-baselines writes it is expected)";

}  // namespace

bool LoadBaselineFile(const std::string& path, BaselineFile* file, std::string* error) {
  *file = BaselineFile{};
  std::string text;
  if (!ReadFile(path, &text, error)) {
    if (NothingAt(path)) {  // no baseline yet; anything else that cannot be read is an error, never overwritten
      error->clear();
      return true;
    }
    return false;
  }
  return LoadBaselineText(text, path, file, error);
}

bool LoadScenarioBaseline(const std::string& dir, const std::string& scenario, BaselineFile* file, std::string* error) {
  const std::string path = BaselinePath(dir, scenario);
  if (!LoadBaselineFile(path, file, error)) return false;
  if (file->exists && file->scenario != scenario) {
    *error = path + ": at scenario: expected " + Quoted(scenario) +
             " (the scenario this file is the baseline of), got " + Quoted(file->scenario) + kBaselineExpected;
    *file = BaselineFile{};
    return false;
  }
  return true;
}

bool LoadBaselineText(const std::string& text, const std::string& path, BaselineFile* file, std::string* error) {
  *file = BaselineFile{};
  OrderedJson j;
  if (!ParseJsonDocument(text, path, &j, error)) return false;
  BaselineFile read;
  const std::vector<Field> fields = {
      {"scenario", StringField(&read.scenario)},
      {"oomguard_version", AnyStringField(&read.oomguard_version)},
      {"libtorch_version", AnyStringField(&read.libtorch_version)},
      {"tolerance", ToleranceField(&read.tolerance, &read.metric_tolerances)},
      {"entries", [&](const OrderedJson& v, const JsonPath& p, std::string* e) {
         if (!v.is_array()) return Fail(p, "expected an array of entries, got " + DescribeJson(v), e);
         for (size_t i = 0; i < v.size(); ++i) {
           BaselineEntry entry;
           const JsonPath at = p.Index(static_cast<int64_t>(i));
           if (!EntryField(&entry)(v[i], at, e)) return false;
           if (read.Find(entry.variant, entry.backend, entry.cap_bytes, entry.kernels, entry.parallel) != nullptr) {
             return Fail(at,
                         "a second entry for variant " + Quoted(entry.variant) + ", backend " + entry.backend +
                             (entry.kernels.empty() ? "" : ", kernels " + entry.kernels) +
                             (entry.parallel.empty() ? "" : ", parallel " + entry.parallel) + ", cap_bytes " +
                             std::to_string(entry.cap_bytes) + " (each may appear once)",
                         e);
           }
           read.entries.push_back(std::move(entry));
         }
         return true;
       }}};
  std::string what;
  bool ok = ReadFields(j, JsonPath(), fields, /*allow_null=*/false, &what);
  for (const char* key : {"scenario", "entries"}) {
    if (ok && !j.contains(key)) ok = Fail(JsonPath(), std::string("missing required key \"") + key + "\"", &what);
  }
  if (!ok) {
    *error = path + ": " + what + kBaselineExpected;
    return false;
  }
  read.exists = true;
  *file = std::move(read);
  return true;
}

std::string SerializeBaselineFile(const BaselineFile& file) {
  std::vector<BaselineEntry> entries = file.entries;
  std::sort(entries.begin(), entries.end(), [](const BaselineEntry& a, const BaselineEntry& b) {
    return std::tie(a.variant, a.backend, a.kernels, a.parallel, a.cap_bytes) <
           std::tie(b.variant, b.backend, b.kernels, b.parallel, b.cap_bytes);
  });
  json j;  // std::map-backed: keys come out sorted, so files diff well
  j["scenario"] = file.scenario;
  j["oomguard_version"] = file.oomguard_version;
  j["libtorch_version"] = file.libtorch_version;
  json tolerance = ToleranceToJson(file.tolerance);
  if (!file.metric_tolerances.empty()) {
    for (const auto& [metric, t] : file.metric_tolerances) tolerance["metrics"][metric] = ToleranceToJson(t);
  }
  j["tolerance"] = tolerance;
  json out = json::array();
  for (const BaselineEntry& e : entries) {
    json entry = {{"variant", e.variant},       {"backend", e.backend},        {"card", e.card},
                  {"cap_bytes", e.cap_bytes},   {"peak_bytes", e.peak_bytes},  {"phase_peaks", e.phase_peaks},
                  {"live_after", e.live_after}, {"alloc_count", e.alloc_count}};
    if (!e.kernels.empty()) entry["kernels"] = e.kernels;  // cpu's: left out, as in files older than the field
    if (!e.parallel.empty()) entry["parallel"] = e.parallel;  // one process: left out, likewise
    if (!e.rank_peaks.empty()) entry["rank_peaks"] = e.rank_peaks;  // real ranks only
    out.push_back(std::move(entry));
  }
  j["entries"] = out;
  return DumpJson(j, 2) + "\n";
}

BaselineEntry EntryFromMeasurement(const VariantMeasurement& m) {
  BaselineEntry e;
  e.variant = m.variant;
  e.backend = m.backend;
  e.card = m.card;
  e.kernels = BaselineKernels(m);
  e.parallel = BaselineParallel(m);
  e.cap_bytes = m.cap_bytes;
  e.peak_bytes = m.ledger.peak_bytes;
  for (const PhasePeak& p : m.ledger.phase_peaks) e.phase_peaks[p.phase] = p.peak_bytes;
  for (const IterationMeasurement& it : m.iterations) e.live_after.push_back(it.live_after_bytes);
  e.alloc_count = m.ledger.alloc_count;
  for (const RankMeasurement& r : m.ranks) e.rank_peaks.push_back(r.peak_bytes);
  return e;
}

std::string BaselineParallel(const VariantMeasurement& m) {
  if (!m.parallel) return "";
  const ParallelMeasurement& p = *m.parallel;
  std::string key = (p.strategy.empty() ? "" : p.strategy + " ") + "rank " + std::to_string(p.rank) + " of " +
                    std::to_string(p.world);
  if (!p.param_dtype.empty()) key += ", param_dtype " + p.param_dtype;
  if (!p.reduce_dtype.empty()) key += ", reduce_dtype " + p.reduce_dtype;
  if (p.master_weights) key += ", master weights";
  return key;
}

std::string BaselineKernels(const VariantMeasurement& m) {
  return m.backend == "meta" && m.kernels != "cpu" ? m.kernels : "";
}

}  // namespace oomguard
