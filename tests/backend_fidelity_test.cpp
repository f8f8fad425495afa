// The catalog's committed baselines hold cpu and meta numbers side by side: for every scenario that
// runs on both, meta's peak, phase peaks and live bytes after each iteration equal cpu's to the byte
// (issue: "the catalog runs on --backend meta and its peaks equal the cpu run's, scenario by
// scenario"). CI's catalog run keeps the cpu entries true; the runner keeps the meta ones.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "baselines/baseline_store.h"
#include "scenario/scenario_loader.h"

namespace oomguard {
namespace {

const std::string kCatalog = std::string(OOMGUARD_SOURCE_DIR) + "/scenarios";

TEST(BackendFidelity, MetaBaselinesEqualCpuBaselinesForEveryScenarioOnBoth) {
  std::vector<std::string> files;
  std::string error;
  ASSERT_TRUE(FindScenarioFiles({kCatalog}, &files, &error)) << error;
  int compared_scenarios = 0, compared_entries = 0;
  for (const std::string& path : files) {
    Scenario s;
    ASSERT_TRUE(LoadScenarioFile(path, &s, &error)) << error;
    const auto& b = s.backends;
    if (std::find(b.begin(), b.end(), "cpu") == b.end() || std::find(b.begin(), b.end(), "meta") == b.end()) continue;
    SCOPED_TRACE(s.name);
    BaselineFile baselines;
    ASSERT_TRUE(LoadBaselineFile(BaselinePath(kCatalog + "/baselines", s.name), &baselines, &error)) << error;
    for (const VariantSpec& v : s.variants) {
      const BaselineEntry* cpu = nullptr;
      const BaselineEntry* meta = nullptr;
      for (const BaselineEntry& e : baselines.entries) {
        if (e.variant != v.name) continue;
        if (e.backend == "cpu") cpu = &e;
        if (e.backend == "meta") meta = &e;
      }
      ASSERT_NE(cpu, nullptr) << v.name << " has no cpu baseline";
      ASSERT_NE(meta, nullptr) << v.name << " has no meta baseline";
      EXPECT_EQ(meta->peak_bytes, cpu->peak_bytes) << v.name;
      EXPECT_EQ(meta->phase_peaks, cpu->phase_peaks) << v.name;
      EXPECT_EQ(meta->live_after, cpu->live_after) << v.name;
      ++compared_entries;
    }
    ++compared_scenarios;
  }
  EXPECT_GE(compared_scenarios, 13);
  EXPECT_GE(compared_entries, 40);
}

}  // namespace
}  // namespace oomguard
