#include "baselines/baseline_store.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "base/files.h"
#include "scenario/json_document.h"

namespace oomguard {

using nlohmann::json;

int64_t Tolerance::Allowed(int64_t baseline) const {
  return std::max(absolute_bytes, static_cast<int64_t>(std::floor(relative * static_cast<double>(baseline))));
}

const BaselineEntry* BaselineFile::Find(const std::string& variant, const std::string& backend,
                                        int64_t cap_bytes) const {
  for (const BaselineEntry& e : entries) {
    if (e.variant == variant && e.backend == backend && e.cap_bytes == cap_bytes) return &e;
  }
  return nullptr;
}

void BaselineFile::Put(BaselineEntry entry) {
  for (BaselineEntry& e : entries) {
    if (e.variant == entry.variant && e.backend == entry.backend && e.cap_bytes == entry.cap_bytes) {
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

Tolerance ToleranceFromJson(const OrderedJson& j) {
  Tolerance t;
  t.relative = j.value("relative", 0.0);
  t.absolute_bytes = j.value("absolute_bytes", int64_t{0});
  return t;
}

}  // namespace

bool LoadBaselineFile(const std::string& path, BaselineFile* file, std::string* error) {
  *file = BaselineFile{};
  std::string text, unreadable;
  if (!ReadFile(path, &text, &unreadable)) return true;  // no baseline yet
  OrderedJson j;
  if (!ParseJsonDocument(text, path, &j, error)) return false;
  std::string at = "top level";
  try {
    file->exists = true;
    at = "scenario";
    file->scenario = j.at("scenario").get<std::string>();
    file->oomguard_version = j.value("oomguard_version", "");
    file->libtorch_version = j.value("libtorch_version", "");
    if (j.contains("tolerance")) {
      at = "tolerance";
      const OrderedJson& t = j.at("tolerance");
      file->tolerance = ToleranceFromJson(t);
      if (t.contains("metrics")) {
        for (const auto& [metric, mt] : t.at("metrics").items())
          file->metric_tolerances[metric] = ToleranceFromJson(mt);
      }
    }
    at = "entries";
    const OrderedJson& entries = j.at("entries");
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string prefix = "entries[" + std::to_string(i) + "].";
      const OrderedJson& e = entries.at(i);
      // Each read names its field first, so an error points at it.
      auto field = [&](const char* key) -> const OrderedJson& {
        at = prefix + key;
        return e.at(key);
      };
      BaselineEntry entry;
      entry.variant = field("variant").get<std::string>();
      entry.backend = field("backend").get<std::string>();
      entry.card = e.value("card", "");
      entry.cap_bytes = field("cap_bytes").get<int64_t>();
      entry.peak_bytes = field("peak_bytes").get<int64_t>();
      for (const auto& [phase, bytes] : field("phase_peaks").items()) entry.phase_peaks[phase] = bytes.get<int64_t>();
      entry.live_after = field("live_after").get<std::vector<int64_t>>();
      entry.alloc_count = field("alloc_count").get<int64_t>();
      file->entries.push_back(std::move(entry));
    }
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    if (size_t bracket = what.find("] "); bracket != std::string::npos) what = what.substr(bracket + 2);
    *error = path + ": at " + at + ": " + what + " (a baseline file as --update-baselines writes it is expected)";
    return false;
  }
  return true;
}

std::string SerializeBaselineFile(const BaselineFile& file) {
  std::vector<BaselineEntry> entries = file.entries;
  std::sort(entries.begin(), entries.end(), [](const BaselineEntry& a, const BaselineEntry& b) {
    return std::tie(a.variant, a.backend, a.cap_bytes) < std::tie(b.variant, b.backend, b.cap_bytes);
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
    out.push_back({{"variant", e.variant},
                   {"backend", e.backend},
                   {"card", e.card},
                   {"cap_bytes", e.cap_bytes},
                   {"peak_bytes", e.peak_bytes},
                   {"phase_peaks", e.phase_peaks},
                   {"live_after", e.live_after},
                   {"alloc_count", e.alloc_count}});
  }
  j["entries"] = out;
  return j.dump(2) + "\n";
}

BaselineEntry EntryFromMeasurement(const VariantMeasurement& m) {
  BaselineEntry e;
  e.variant = m.variant;
  e.backend = m.backend;
  e.card = m.card;
  e.cap_bytes = m.cap_bytes;
  e.peak_bytes = m.ledger.peak_bytes;
  for (const PhasePeak& p : m.ledger.phase_peaks) e.phase_peaks[p.phase] = p.peak_bytes;
  for (const IterationMeasurement& it : m.iterations) e.live_after.push_back(it.live_after_bytes);
  e.alloc_count = m.ledger.alloc_count;
  return e;
}

}  // namespace oomguard
