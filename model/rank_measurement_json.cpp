#include "model/rank_measurement_json.h"

#include <stdexcept>

namespace oomguard {

using nlohmann::json;

namespace {

json PhasePeaksToJson(const std::vector<PhasePeak>& peaks, const char* bytes_key) {
  json j = json::array();
  for (const PhasePeak& p : peaks) j.push_back({{"phase", p.phase}, {bytes_key, p.peak_bytes}});
  return j;
}

std::vector<PhasePeak> PhasePeaksFromJson(const json& j, const char* bytes_key) {
  std::vector<PhasePeak> peaks;
  for (const json& p : j) peaks.push_back({p.at("phase").get<std::string>(), p.at(bytes_key).get<int64_t>()});
  return peaks;
}

json Optional(const std::optional<int64_t>& value) { return value ? json(*value) : json(nullptr); }

}  // namespace

json RanksToJson(const std::vector<RankMeasurement>& ranks) {
  json out = json::array();
  for (const RankMeasurement& r : ranks) {
    json iterations = json::array();
    for (const IterationMeasurement& it : r.iterations) {
      iterations.push_back({{"peak_bytes", it.peak_bytes},
                            {"live_after_backward_bytes", it.live_after_backward_bytes},
                            {"live_after_bytes", it.live_after_bytes}});
    }
    out.push_back({{"rank", r.rank},
                   {"outcome", Name(r.outcome)},
                   {"error", r.error},
                   {"ended", r.ended},
                   {"measured", r.measured},
                   {"peak_bytes", r.peak_bytes},
                   {"peak_phase", r.peak_phase},
                   {"phase_peaks", PhasePeaksToJson(r.phase_peaks, "peak_bytes")},
                   {"live_at_peak_by_origin", PhasePeaksToJson(r.peak_by_origin, "bytes")},
                   {"iterations", iterations},
                   {"param_bytes", r.param_bytes},
                   {"grad_bytes", Optional(r.grad_bytes)},
                   {"optimizer_state_bytes", Optional(r.optimizer_state_bytes)},
                   {"communication_bytes", r.communication_bytes},
                   {"duration_ms", r.duration_ms}});
  }
  return out;
}

std::vector<RankMeasurement> RanksFromJson(const json& j) {
  std::vector<RankMeasurement> ranks;
  for (const json& o : j) {
    RankMeasurement r;
    r.rank = o.at("rank").get<int64_t>();
    const std::string outcome = o.at("outcome").get<std::string>();
    if (!Parse(outcome, &r.outcome))
      throw std::invalid_argument("rank " + std::to_string(r.rank) + ": unknown outcome '" + outcome + "'");
    r.error = o.at("error").get<std::string>();
    r.ended = o.at("ended").get<bool>();
    r.measured = o.at("measured").get<bool>();
    r.peak_bytes = o.at("peak_bytes").get<int64_t>();
    r.peak_phase = o.at("peak_phase").get<std::string>();
    r.phase_peaks = PhasePeaksFromJson(o.at("phase_peaks"), "peak_bytes");
    r.peak_by_origin = PhasePeaksFromJson(o.at("live_at_peak_by_origin"), "bytes");
    for (const json& it : o.at("iterations")) {
      r.iterations.push_back({it.at("peak_bytes").get<int64_t>(), it.at("live_after_backward_bytes").get<int64_t>(),
                              it.at("live_after_bytes").get<int64_t>()});
    }
    r.param_bytes = o.at("param_bytes").get<int64_t>();
    const json& grad = o.at("grad_bytes");
    if (!grad.is_null()) r.grad_bytes = grad.get<int64_t>();
    const json& state = o.at("optimizer_state_bytes");
    if (!state.is_null()) r.optimizer_state_bytes = state.get<int64_t>();
    r.communication_bytes = o.at("communication_bytes").get<int64_t>();
    r.duration_ms = o.at("duration_ms").get<double>();
    ranks.push_back(std::move(r));
  }
  return ranks;
}

}  // namespace oomguard
