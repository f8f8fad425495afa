// --update-baselines over real runs: only the files whose numbers changed are rewritten, a regression
// against the written numbers fails, and what did not pass is named and not recorded.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "base/atomic_file.h"
#include "baselines/baseline_store.h"
#include "baselines/baseline_update.h"
#include "runner_fixture.h"

namespace oomguard {
namespace {

using BaselineUpdateTest = RunnerTest;

// Seconds and nanoseconds of a file's last modification, to see whether it was rewritten.
std::pair<int64_t, int64_t> ModifiedAt(const std::string& path) {
  struct stat st {};
  stat(path.c_str(), &st);
  return {st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
}

TEST_F(BaselineUpdateTest, UpdatingBaselinesRewritesExactlyTheAffectedFiles) {
  std::string other = kTinyScenario;
  other.replace(other.find("\"tiny\""), 6, "\"other\"");
  Write("a.json", kTinyScenario);
  const std::string b = Write("b.json", other);
  RunOptions options;
  options.paths = {dir_};
  options.baselines_dir = dir_ + "/baselines";
  mkdir(options.baselines_dir.c_str(), 0755);
  const std::string tiny_baseline = options.baselines_dir + "/tiny.json";
  const std::string other_baseline = options.baselines_dir + "/other.json";
  std::ostringstream log;
  std::string error;

  RunResults first = Run(options);
  EXPECT_EQ(first.scenarios[0].variants[0].baseline.verdict, BaselineVerdict::kNew);
  ASSERT_TRUE(UpdateBaselines(first, options.baselines_dir, log, &error)) << error;
  EXPECT_NE(log.str().find("baselines: 2 file(s) written"), std::string::npos) << log.str();
  const auto tiny_written = ModifiedAt(tiny_baseline);

  // A deliberate change to one scenario: only its baseline is rewritten.
  other.replace(other.find("\"batch\": 3"), 10, "\"batch\": 4");
  std::ofstream(b) << other;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  RunOptions update = options;
  update.update_baselines = true;
  RunResults second = Run(update);
  log.str("");
  ASSERT_TRUE(UpdateBaselines(second, update.baselines_dir, log, &error)) << error;
  EXPECT_NE(log.str().find("baselines: 1 file(s) written"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("changed    other/base"), std::string::npos) << log.str();
  EXPECT_EQ(ModifiedAt(tiny_baseline), tiny_written);

  // Unchanged code passes against its baselines; a baseline lowered by 10% makes a regression.
  RunResults third = Run(options);
  for (const ScenarioResult& s : third.scenarios) EXPECT_EQ(s.code, ResultCode::kPass) << s.name;
  BaselineFile file;
  ASSERT_TRUE(LoadBaselineFile(tiny_baseline, &file, &error)) << error;
  for (BaselineEntry& e : file.entries) e.peak_bytes = e.peak_bytes * 9 / 10;
  ASSERT_TRUE(WriteFileAtomically(tiny_baseline, SerializeBaselineFile(file), &error)) << error;
  RunResults fourth = Run(options);
  EXPECT_EQ(fourth.scenarios[0].name, "tiny");
  EXPECT_EQ(fourth.scenarios[0].code, ResultCode::kFail);
  EXPECT_EQ(fourth.scenarios[0].variants[0].baseline.verdict, BaselineVerdict::kRegressed);
  EXPECT_EQ(fourth.scenarios[0].variants[0].reasons[0].rfind("regression: peak_bytes ", 0), 0u);
  rmdir(options.baselines_dir.c_str());
}

// A variant that failed records no baseline, and says so; a scenario none of whose variants passed
// gets no file of no entries.
TEST_F(BaselineUpdateTest, UpdatingBaselinesRecordsOnlyWhatPassedAndNamesTheRest) {
  RunOptions options;
  options.paths = {Write("tiny.json", kTinyScenario)};
  options.baselines_dir = dir_ + "/baselines";
  options.cap = "1KiB";  // every variant runs out of memory: FAIL
  const RunResults report = Run(options);
  ASSERT_EQ(report.scenarios[0].variants.size(), 2u);
  std::ostringstream log;
  std::string error;
  ASSERT_TRUE(UpdateBaselines(report, options.baselines_dir, log, &error)) << error;
  EXPECT_EQ(log.str(),
            "  not recorded tiny/base: FAIL (a baseline records runs that pass; any entry it has stays as it was)\n"
            "  not recorded tiny/wider: FAIL (a baseline records runs that pass; any entry it has stays as it was)\n"
            "baselines: 0 file(s) written\n");
  EXPECT_NE(access((options.baselines_dir + "/tiny.json").c_str(), F_OK), 0);
  rmdir(options.baselines_dir.c_str());
}

}  // namespace
}  // namespace oomguard
