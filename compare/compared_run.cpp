#include "compare/compared_run.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/json_text.h"

namespace oomguard {

namespace {

// A byte count as the results file writes it: an integer in [0, 2^63). A float such as 1e30 would
// otherwise be cast to int64_t (undefined; it showed as a negative number).
struct BadValue {
  std::string what;
};

int64_t Bytes(const nlohmann::json& object, const char* key, const std::string& at) {
  const nlohmann::json& v = object.at(key);
  const bool fits = v.is_number_integer() &&
                    (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) &&
                    v.get<int64_t>() >= 0;
  if (!fits) throw BadValue{at + "." + key + ": expected a byte count (an integer >= 0), got " + DumpJson(v)};
  return v.get<int64_t>();
}

}  // namespace

bool LoadComparedRun(const std::string& path, ComparedRun* out, std::string* error) {
  std::string text;
  if (!ReadFile(path, &text, error)) return false;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("scenarios") || !j.contains("backend")) {
    *error = path + ": not an oomguard results file (expected the JSON `oomguard run --json FILE` writes)";
    return false;
  }
  try {
    out->backend = j.at("backend").get<std::string>();
    out->label = out->backend;
    for (const nlohmann::json& s : j.at("scenarios")) {
      for (const nlohmann::json& v : s.at("variants")) {
        ComparedRun::Entry e{s.at("name").get<std::string>(), v.at("name").get<std::string>(), std::nullopt};
        if (v.contains("measurement")) {
          const std::string at = s.at("name").get<std::string>() + "/" + e.variant + ": measurement";
          const nlohmann::json& m = v.at("measurement");
          e.peak_bytes = Bytes(m, "peak_bytes", at);
          if (m.contains("cuda")) {
            const nlohmann::json& c = m.at("cuda");
            e.cuda_allocated_peak = Bytes(c, "allocated_peak_bytes", at + ".cuda");
            e.cuda_reserved_peak = Bytes(c, "reserved_peak_bytes", at + ".cuda");
            if (c.contains("requested_peak_bytes"))
              e.cuda_requested_peak = Bytes(c, "requested_peak_bytes", at + ".cuda");
            if (c.contains("allocated_at_start_bytes"))
              e.cuda_allocated_at_start = Bytes(c, "allocated_at_start_bytes", at + ".cuda");
            if (c.contains("reserved_at_start_bytes"))
              e.cuda_reserved_at_start = Bytes(c, "reserved_at_start_bytes", at + ".cuda");
          }
          if (m.contains("cuda_model")) {
            e.model_allocated_peak = Bytes(m.at("cuda_model"), "allocated_peak_bytes", at + ".cuda_model");
            e.model_reserved_peak = Bytes(m.at("cuda_model"), "reserved_peak_bytes", at + ".cuda_model");
            if (m.at("cuda_model").contains("allocated_at_start_bytes"))
              e.model_allocated_at_start = Bytes(m.at("cuda_model"), "allocated_at_start_bytes", at + ".cuda_model");
            if (m.at("cuda_model").contains("reserved_at_start_bytes"))
              e.model_reserved_at_start = Bytes(m.at("cuda_model"), "reserved_at_start_bytes", at + ".cuda_model");
          }
        }
        out->entries.push_back(std::move(e));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    *error = path + ": not an oomguard results file: " + e.what();
    return false;
  } catch (const BadValue& e) {
    *error = path + ": " + e.what;
    return false;
  }
  return true;
}

int ReferenceIndex(const std::string& reference, const std::vector<ComparedRun>& runs) {
  if (reference.empty()) return static_cast<int>(runs.size()) - 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].backend == reference) return static_cast<int>(i);
  }
  char* end = nullptr;
  const long position = std::strtol(reference.c_str(), &end, 10);
  if (end != reference.c_str() && *end == '\0' && position >= 1 && position <= static_cast<long>(runs.size())) {
    return static_cast<int>(position - 1);
  }
  return -1;
}

size_t AddAllocatorColumns(std::vector<ComparedRun>* runs, size_t reference) {
  std::vector<ComparedRun> out;
  size_t new_reference = 0;
  for (size_t i = 0; i < runs->size(); ++i) {
    const ComparedRun& run = (*runs)[i];
    out.push_back(run);
    if (i == reference) new_reference = out.size() - 1;
    const auto net = [](std::optional<int64_t> peak, int64_t held) {
      return peak ? std::optional<int64_t>(*peak - held) : std::nullopt;
    };
    const bool has_model = std::any_of(run.entries.begin(), run.entries.end(),
                                       [](const ComparedRun::Entry& e) { return e.model_allocated_peak.has_value(); });
    for (const bool allocated : {true, false}) {
      if (!has_model) continue;
      ComparedRun column{
          run.label + (allocated ? " model allocated" : " model reserved"), run.backend, allocated, true, false, {}};
      for (const ComparedRun::Entry& e : run.entries) {
        // Net of what card mode's model held from the start, as the cuda columns are of the GPU's.
        ComparedRun::Entry cell{e.scenario, e.variant};
        cell.peak_bytes = allocated ? net(e.model_allocated_peak, e.model_allocated_at_start)
                                    : net(e.model_reserved_peak, e.model_reserved_at_start);
        cell.cuda_allocated_at_start = e.model_allocated_at_start;
        cell.cuda_reserved_at_start = e.model_reserved_at_start;
        column.entries.push_back(std::move(cell));
      }
      out.push_back(std::move(column));
    }
    const bool has_stats = std::any_of(run.entries.begin(), run.entries.end(),
                                       [](const ComparedRun::Entry& e) { return e.cuda_allocated_peak.has_value(); });
    if (!has_stats) continue;
    for (const bool allocated : {true, false}) {
      ComparedRun column{
          run.label + (allocated ? " allocated" : " reserved"), run.backend, allocated, false, allocated, {}};
      for (const ComparedRun::Entry& e : run.entries) {
        ComparedRun::Entry cell{e.scenario, e.variant};
        cell.peak_bytes = allocated ? net(e.cuda_allocated_peak, e.cuda_allocated_at_start)
                                    : net(e.cuda_reserved_peak, e.cuda_reserved_at_start);
        if (allocated) cell.cuda_requested_peak = net(e.cuda_requested_peak, e.cuda_allocated_at_start);
        cell.cuda_allocated_at_start = e.cuda_allocated_at_start;
        cell.cuda_reserved_at_start = e.cuda_reserved_at_start;
        column.entries.push_back(std::move(cell));
      }
      out.push_back(std::move(column));
      if (i == reference && allocated) new_reference = out.size() - 1;
    }
  }
  *runs = std::move(out);
  return new_reference;
}

}  // namespace oomguard
