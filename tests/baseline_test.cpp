// Baselines: the store's file format, the comparison's verdicts, and atomic writes under SIGKILL.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/atomic_file.h"
#include "baselines/baseline_diff.h"
#include "baselines/baseline_store.h"

namespace oomguard {
namespace {

std::string TempPath(const std::string& name) {
  return "/tmp/oomguard-baseline-test-" + std::to_string(getpid()) + name;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

VariantMeasurement Measured(const std::string& variant, int64_t peak) {
  VariantMeasurement m;
  m.variant = variant;
  m.backend = "cpu";
  m.card = "NVIDIA T4 16GB";
  m.cap_bytes = 1000000;
  m.ledger.peak_bytes = peak;
  m.ledger.alloc_count = 10;
  m.ledger.phase_peaks = {{"forward", peak * 9 / 10}, {"backward", peak}};
  m.iterations = {{peak, 50, 40}, {peak, 50, 40}};
  return m;
}

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
                       ": at entries[0].cap_bytes: type must be number, but is string (a baseline file as "
                       "--update-baselines writes it is expected)");
  unlink(path.c_str());
}

TEST(BaselineDiff, VerdictsFollowTheTolerance) {
  BaselineFile file;
  file.Put(EntryFromMeasurement(Measured("v", 1000)));
  EXPECT_EQ(CompareWithBaseline(file, "f", Measured("v", 1000)).verdict, BaselineVerdict::kUnchanged);
  const BaselineComparison worse = CompareWithBaseline(file, "f", Measured("v", 1001));
  EXPECT_EQ(worse.verdict, BaselineVerdict::kRegressed);  // exact by default: one byte is a regression
  ASSERT_FALSE(worse.metrics.empty());
  EXPECT_EQ(worse.metrics[0].metric, "peak_bytes");
  EXPECT_EQ(worse.metrics[0].delta, 1);
  EXPECT_DOUBLE_EQ(worse.metrics[0].delta_percent, 0.1);
  EXPECT_EQ(CompareWithBaseline(file, "f", Measured("v", 900)).verdict, BaselineVerdict::kImproved);
  EXPECT_EQ(CompareWithBaseline(file, "f", Measured("other", 900)).verdict, BaselineVerdict::kNew);
  file.tolerance.relative = 0.01;  // 10 bytes of 1000
  EXPECT_EQ(CompareWithBaseline(file, "f", Measured("v", 1010)).verdict, BaselineVerdict::kUnchanged);
  EXPECT_EQ(CompareWithBaseline(file, "f", Measured("v", 1011)).verdict, BaselineVerdict::kRegressed);
}

// The comparison is data; what of it fails a variant is data too (the verdict decides the code).
TEST(BaselineDiff, ARegressionIsAFailureWithTheNumbers) {
  BaselineFile file;
  file.Put(EntryFromMeasurement(Measured("v", 10 * 1048576)));
  const BaselineComparison c = CompareWithBaseline(file, "b.json", Measured("v", 11 * 1048576));
  EXPECT_EQ(c.verdict, BaselineVerdict::kRegressed);
  EXPECT_EQ(BaselineFailures(c, /*strict=*/false),
            (std::vector<std::string>{
                "regression: peak_bytes 11.00 MiB vs baseline 10.00 MiB (+1024.00 KiB, +10.0%)",
                "regression: phase_peak.backward 11.00 MiB vs baseline 10.00 MiB (+1024.00 KiB, +10.0%)",
                "regression: phase_peak.forward 9.90 MiB vs baseline 9.00 MiB (+921.60 KiB, +10.0%)"}));
  EXPECT_TRUE(BaselineFailures(CompareWithBaseline(file, "b.json", Measured("v", 10 * 1048576)), true).empty());
}

TEST(BaselineDiff, StrictFailsAVariantWithoutABaseline) {
  const BaselineComparison c = CompareWithBaseline(BaselineFile{}, "b.json", Measured("v", 100));
  EXPECT_EQ(c.verdict, BaselineVerdict::kNew);
  EXPECT_TRUE(BaselineFailures(c, /*strict=*/false).empty());
  EXPECT_EQ(BaselineFailures(c, /*strict=*/true),
            std::vector<std::string>{"no baseline in b.json (--strict); record one with --update-baselines"});
}

// A writer killed at any moment leaves the old content or the new one, never a mix.
TEST(AtomicFile, AKilledWriterNeverLeavesATornFile) {
  const std::string path = TempPath("atomic.json");
  const std::string a(4 << 20, 'a'), b(4 << 20, 'b');
  std::string error;
  ASSERT_TRUE(WriteFileAtomically(path, a, &error)) << error;
  for (int round = 0; round < 5; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::string e;
      for (int i = 0;; ++i) (void)WriteFileAtomically(path, i % 2 ? a : b, &e);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + 15 * round));
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    const std::string now = Read(path);
    EXPECT_TRUE(now == a || now == b) << "torn file of " << now.size() << " bytes in round " << round;
  }
  unlink(path.c_str());
}

}  // namespace
}  // namespace oomguard
