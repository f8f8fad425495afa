// The baseline store: its file format (every value checked), and updates of a folder of baselines
// (concurrent ones, and the temporaries of killed writers).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "base/atomic_file.h"
#include "baselines/baseline_store.h"
#include "baselines/baseline_update.h"
#include "tests/baseline_measurement.h"
#include "tests/scoped_environment.h"
#include "tests/scratch_folder.h"
#include "tests/written_files.h"

namespace oomguard {
namespace {

using testing::Measured;
using testing::Read;
using testing::TemporariesBeside;
using testing::TempPath;

TEST(BaselineStore, RoundTripsSortedAndKeepsTolerances) {
  BaselineFile file;
  file.scenario = "s";
  file.tolerance.relative = 0.01;
  file.metric_tolerances["alloc_count"].absolute_bytes = 5;
  file.Put(EntryFromMeasurement(Measured("zeta", 2000)));
  file.Put(EntryFromMeasurement(Measured("alpha", 1000)));
  file.Put(EntryFromMeasurement(Measured("alpha", 1500)));  // same key: replaces
  const std::string text = SerializeBaselineFile(file);
  EXPECT_LT(text.find("\"alpha\""), text.find("\"zeta\""));  // entries sorted by variant
  const std::string path = TempPath("roundtrip.json");
  std::string write_error;
  ASSERT_TRUE(WriteFileAtomically(path, text, &write_error)) << write_error;
  BaselineFile loaded;
  std::string error;
  ASSERT_TRUE(LoadBaselineFile(path, &loaded, &error)) << error;
  EXPECT_TRUE(loaded.exists);
  ASSERT_EQ(loaded.entries.size(), 2u);
  EXPECT_EQ(loaded.Find("alpha", "cpu", 1000000)->peak_bytes, 1500);
  EXPECT_EQ(loaded.Find("alpha", "cpu", 1000000)->live_after, (std::vector<int64_t>{40, 40}));
  EXPECT_EQ(loaded.tolerance.relative, 0.01);
  EXPECT_EQ(loaded.ToleranceFor("alloc_count").absolute_bytes, 5);
  EXPECT_EQ(SerializeBaselineFile(loaded), text);  // stable: loading and writing again changes nothing
  unlink(path.c_str());
}

TEST(BaselineStore, AMissingFileIsNoBaselineAndACorruptOneIsAnError) {
  BaselineFile file;
  std::string error;
  EXPECT_TRUE(LoadBaselineFile(TempPath("absent.json"), &file, &error));
  EXPECT_FALSE(file.exists);
  const std::string path = TempPath("corrupt.json");
  std::ofstream(path) << "{\n  \"scenario\": \"s\",\n  \"entries\": [ {\"variant\": \"v\",, } ]\n}\n";
  EXPECT_FALSE(LoadBaselineFile(path, &file, &error));
  EXPECT_EQ(error.rfind(path + ":3:", 0), 0u) << error;
  std::ofstream(path) << R"({"scenario": "s", "entries": [{"variant": "v", "backend": "cpu", "cap_bytes": "big"}]})";
  EXPECT_FALSE(LoadBaselineFile(path, &file, &error));
  EXPECT_EQ(error, path +
                       ": at entries[0].cap_bytes: expected an integer >= 1, got string \"big\" (a baseline file as "
                       "--update-baselines writes it is expected)");
  unlink(path.c_str());
}

// D3, D12: every value of a baseline file is checked, as a scenario's are; nothing is truncated,
// wrapped or ignored.
TEST(BaselineStore, EveryValueIsValidated) {
  const std::string path = TempPath("values.json");
  const std::string entry =
      R"({"variant": "v", "backend": "cpu", "card": "", "cap_bytes": 1000, "peak_bytes": 10, "phase_peaks": {"forward": 10}, "live_after": [4], "alloc_count": 2})";
  auto error_of = [&](const std::string& text) {
    std::ofstream(path) << text;
    BaselineFile file;
    std::string error;
    EXPECT_FALSE(LoadBaselineFile(path, &file, &error)) << text;
    const std::string prefix = path + ": ", suffix = " (a baseline file as --update-baselines writes it is expected)";
    if (error.rfind(prefix, 0) == 0) error = error.substr(prefix.size());
    if (error.ends_with(suffix)) error.resize(error.size() - suffix.size());
    return error;
  };
  auto with = [&](const std::string& from, const std::string& to) {
    std::string e = entry;
    e.replace(e.find(from), from.size(), to);
    return R"({"scenario": "s", "entries": [)" + e + "]}";
  };
  const std::string huge = with("\"peak_bytes\": 10", "\"peak_bytes\": 1e400");
  std::ofstream(path) << huge;
  BaselineFile file;
  std::string error;
  EXPECT_FALSE(LoadBaselineFile(path, &file, &error));  // was nlohmann's out_of_range.406, uncaught
  EXPECT_EQ(error, path + ":1:" + std::to_string(huge.find("1e400") + 1) +
                       ": JSON syntax error: number 1e400 is out of range (a JSON number here must fit a double, at "
                       "most about 1.8e308)");
  EXPECT_EQ(error_of(with("\"peak_bytes\": 10", "\"peak_bytes\": 18446744073709551615")),
            "at entries[0].peak_bytes: expected an integer >= 0, got 18446744073709551615");
  EXPECT_EQ(error_of(with("\"peak_bytes\": 10", "\"peak_bytes\": 10.5")),
            "at entries[0].peak_bytes: expected an integer >= 0, got 10.5");
  EXPECT_EQ(error_of(with("\"live_after\": [4]", "\"live_after\": [-4]")),
            "at entries[0].live_after[0]: expected an integer >= 0, got -4");
  EXPECT_EQ(error_of(with("\"forward\"", "\"forwad\"")),
            "at entries[0].phase_peaks: unknown phase \"forwad\"; did you mean \"forward\"? (phases: setup, "
            "transfer, forward, backward, optimizer, zero_grad, eval, step)");
  EXPECT_EQ(error_of(with("\"alloc_count\"", "\"alloc_cout\"")),
            "at entries[0]: unknown key \"alloc_cout\"; did you mean \"alloc_count\"? (valid keys: variant, backend, "
            "card, kernels, parallel, cap_bytes, peak_bytes, phase_peaks, live_after, alloc_count, rank_peaks)");
  EXPECT_EQ(error_of(with("\"backend\": \"cpu\"", "\"backend\": \"gpu\"")),
            "at entries[0].backend: unknown backend \"gpu\"; did you mean \"cpu\"? (valid values: cpu, meta, cuda)");
  EXPECT_EQ(error_of(R"({"scenario": "s", "entries": [)" + entry + ", " + entry + "]}"),
            "at entries[1]: a second entry for variant \"v\", backend cpu, cap_bytes 1000 (each may appear once)");
  EXPECT_EQ(error_of(R"({"scenario": "s", "entries": [], "tolerance": {"relative": -0.5}})"),
            "at tolerance.relative: expected a fraction in [0, 100] (0.01 is 1%), got -0.5");
  EXPECT_EQ(error_of(R"({"scenario": "s", "entries": [], "tolerance": {"relative": 1e308}})"),
            "at tolerance.relative: expected a fraction in [0, 100] (0.01 is 1%), got 1e+308");
  EXPECT_EQ(error_of(R"({"scenario": "s", "entries": [], "tolerance": {"relativ": 0.1}})"),
            "at tolerance: unknown key \"relativ\"; did you mean \"relative\"? (valid keys: relative, "
            "absolute_bytes, metrics)");
  EXPECT_EQ(error_of(R"({"scenario": "s", "entries": [], "tolerance": {"metrics": {"peak": {}}}})"),
            "at tolerance.metrics: unknown metric \"peak\" (a baseline compares peak_bytes, alloc_count, "
            "phase_peak.<phase>, live_after[N] and rank_peak[R])");
  EXPECT_EQ(error_of(R"({"scenario": "s"})"), "at top level: missing required key \"entries\"");
  unlink(path.c_str());
}

// D11: only "nothing there" is "no baseline yet"; anything there that cannot be read is an error, so an
// update never overwrites it.
TEST(BaselineStore, OnlyAMissingFileIsNoBaseline) {
  const std::string loop = TempPath("loop.json"), dangling = TempPath("dangling.json");
  ASSERT_EQ(symlink(loop.c_str(), loop.c_str()), 0);
  ASSERT_EQ(symlink("/nonexistent/target.json", dangling.c_str()), 0);
  BaselineFile file;
  std::string error;
  EXPECT_FALSE(LoadBaselineFile(loop, &file, &error));
  EXPECT_EQ(error, loop + ": cannot read: Too many levels of symbolic links");
  EXPECT_FALSE(LoadBaselineFile(dangling, &file, &error));
  EXPECT_EQ(error, dangling + ": cannot read: No such file or directory");
  EXPECT_FALSE(LoadBaselineFile("/tmp", &file, &error));
  EXPECT_EQ(error, "/tmp: not a regular file (a folder)");
  unlink(loop.c_str());
  unlink(dangling.c_str());
}

TEST(BaselineStore, ARelativeToleranceNeverOverflows) {
  Tolerance t;
  t.relative = 100;
  EXPECT_EQ(t.Allowed(std::numeric_limits<int64_t>::max()), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(t.Allowed(1000), 100000);
  t.relative = 0.015;
  EXPECT_EQ(t.Allowed(1000), 15);
}

// D33: a baseline file that named another scenario was taken as this one's.
TEST(BaselineStore, ABaselineFileMustNameItsScenario) {
  testing::ScratchFolder folder("baseline-scenario");
  const std::string path = folder.Write("s.json", R"({"scenario": "nope", "entries": []})");
  BaselineFile file;
  std::string error;
  EXPECT_FALSE(LoadScenarioBaseline(folder.path(), "s", &file, &error));
  EXPECT_EQ(error, path +
                       ": at scenario: expected \"s\" (the scenario this file is the baseline of), got \"nope\" (a "
                       "baseline file as --update-baselines writes it is expected)");
  EXPECT_FALSE(file.exists);
  std::ofstream(path) << R"({"scenario": "s", "entries": []})";
  EXPECT_TRUE(LoadScenarioBaseline(folder.path(), "s", &file, &error)) << error;
  EXPECT_TRUE(file.exists);
}

// A run that measured `variant` of scenario "s" (file FOLDER/s.json), as UpdateBaselines reads it.
RunResults RunOf(const std::string& folder, const std::string& variant, int64_t peak) {
  ScenarioResult s;
  s.name = "s";
  s.file = folder + "/s.json";
  VariantResult v;
  v.name = variant;
  v.code = ResultCode::kPass;
  v.measurement = Measured(variant, peak);
  s.variants.push_back(v);
  RunResults report;
  report.scenarios.push_back(s);
  return report;
}

// D25: two --update-baselines at once could lose one run's entries: each file was loaded, merged and
// written with no lock. Eight processes each add their own variant; the test hook pauses each between
// loading and writing, so that without the lock every one merges into the same old file.
TEST(BaselineUpdate, UpdatesAtOnceLoseNoEntry) {
  testing::ScratchFolder folder("baseline-lock");
  testing::ScopedEnvironment env({"OOMGUARD_TEST_BASELINE_PAUSE_MS"});
  env.Set("OOMGUARD_TEST_BASELINE_PAUSE_MS", "200");
  constexpr int kUpdaters = 8;
  std::vector<pid_t> children;
  for (int i = 0; i < kUpdaters; ++i) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::ostringstream out;
      std::string error;
      _exit(UpdateBaselines(RunOf(folder.path(), "v" + std::to_string(i), 1000 + i), "", out, &error) ? 0 : 1);
    }
    children.push_back(child);
  }
  for (const pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  BaselineFile file;
  std::string error;
  ASSERT_TRUE(LoadBaselineFile(folder.path() + "/baselines/s.json", &file, &error)) << error;
  EXPECT_EQ(file.entries.size(), static_cast<size_t>(kUpdaters));
  for (int i = 0; i < kUpdaters; ++i) {
    const BaselineEntry* entry = file.Find("v" + std::to_string(i), "cpu", 1000000);
    ASSERT_NE(entry, nullptr) << "v" << i << " lost";
    EXPECT_EQ(entry->peak_bytes, 1000 + i);
  }
  // The lock file stays, empty, and is no baseline: the next update reads only s.json.
  EXPECT_EQ(Read(folder.path() + "/baselines/" + kBaselinesLockFile), "");
}

// D33 (D14 residual): a killed writer's temporary stayed in baselines/ until that same file was
// rewritten; an update that left the file unchanged kept it. Any update of the folder now removes the
// temporaries of dead writers, whichever file they were for; a live writer's stays.
TEST(BaselineUpdate, AnUpdateRemovesTheTemporariesOfDeadWriters) {
  testing::ScratchFolder folder("baseline-stale");
  std::ostringstream out;
  std::string error;
  ASSERT_TRUE(UpdateBaselines(RunOf(folder.path(), "v", 1000), "", out, &error)) << error;
  const std::string baselines = folder.path() + "/baselines";
  const std::string dead = "999999999";  // above any pid_max: no such process
  const std::string live = std::to_string(getpid());
  for (const std::string& name : {".s.json.tmp." + dead, ".other.json.tmp." + dead, ".s.json.tmp." + live}) {
    std::ofstream(baselines + "/" + name) << "partial";
  }
  ASSERT_TRUE(UpdateBaselines(RunOf(folder.path(), "v", 1000), "", out, &error)) << error;  // changes nothing
  EXPECT_EQ(TemporariesBeside(baselines + "/s.json"), std::vector<std::string>{".s.json.tmp." + live});
  EXPECT_EQ(TemporariesBeside(baselines + "/other.json"), std::vector<std::string>{});
}

}  // namespace
}  // namespace oomguard
