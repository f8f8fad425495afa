// A variant of a scenario of the catalog (scenarios/NAME.json), loaded as the runner loads it; a test
// failure when the file does not load or has no such variant.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "scenario/scenario_loader.h"

namespace oomguard {

inline VariantSpec CatalogVariant(const std::string& scenario, const std::string& variant) {
  Scenario s;
  std::string error;
  EXPECT_TRUE(LoadScenarioFile(std::string(OOMGUARD_SOURCE_DIR) + "/scenarios/" + scenario + ".json", &s, &error))
      << error;
  for (const VariantSpec& v : s.variants) {
    if (v.name == variant) return v;
  }
  ADD_FAILURE() << "no variant " << variant;
  return {};
}

}  // namespace oomguard
