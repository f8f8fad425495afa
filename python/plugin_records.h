// The pytest plugin's records as the CLI's results (oomguard/pytest_plugin.py, oomguard/report.py), for
// oomguard._core (core.cpp): a test's baseline comparison, and the run's results for the baseline
// update and the reports (Note [One implementation of baselines], plugin_records.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "model/run_results.h"

namespace plugin {

template <typename T>
T Get(const pybind11::dict& d, const char* key, T fallback = T()) {
  return d.contains(key) && !d[key].is_none() ? d[key].template cast<T>() : fallback;
}

// The test's record against its scenario's baseline file in `dir`: the comparison as a dict.
pybind11::dict CompareTest(const std::string& dir, const std::string& scenario, const pybind11::dict& record,
                           bool strict);
// The run's records, by scenario, as the CLI's RunResults.
oomguard::RunResults Results(const pybind11::list& scenarios, const pybind11::dict& run);

}  // namespace plugin
