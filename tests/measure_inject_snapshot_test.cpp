// oomguard::Measure's inject and snapshot options (oomguard/measure.h): the injected failure is the
// measurement's OOM with the request it failed, a bad spec and an unwritable snapshot path are
// std::invalid_argument before anything runs, and the snapshot is written whether the measurement
// passed or not. The Python package's tests check the same through MeasureScope, byte for byte
// (python/tests/test_inject_snapshot.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "oomguard/measure.h"
#include "scratch_folder.h"

namespace oomguard {
namespace {

// Two requests in setup: 2048 bytes, then 8192 (a Linear(64, 32)'s weight, as floats).
void TwoTensors(Context& ctx) {
  const at::Tensor x = at::ones({32, 16}, ctx.options());
  const at::Tensor w = at::empty({32, 64}, ctx.options());
}

// Options set one by one: designated initializers that skip members warn (-Wmissing-field-initializers).
MeasureOptions Options(const std::string& backend, const std::string& cap, std::vector<std::string> inject,
                       const std::string& snapshot = "") {
  MeasureOptions options;
  options.backend = backend;
  options.cap = cap;
  options.inject = std::move(inject);
  options.snapshot = snapshot;
  return options;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MeasureInjectAndSnapshot, AnInjectedFailureIsTheOomWithTheRequestItFailed) {
  const Measurement m = Measure(TwoTensors, Options("cpu", "1GiB", {"nth=2"}));
  EXPECT_EQ(m.outcome, "oom");
  ASSERT_TRUE(m.oom);
  EXPECT_TRUE(m.oom->injected);
  EXPECT_EQ(m.oom->requested_bytes, 8192);
  ASSERT_TRUE(m.injection);
  EXPECT_EQ(m.injection->spec, "nth=2");
  EXPECT_EQ(m.injection->requests_seen, 2);
  ASSERT_EQ(m.injection->failures.size(), 1u);
  EXPECT_EQ(m.injection->failures[0].allocation_index, 2);
  EXPECT_EQ(m.injection->failures[0].bytes, 8192);
  EXPECT_EQ(m.injection->failures[0].phase, "setup");
  EXPECT_EQ(m.injection->failures[0].policy, "nth=2");
  EXPECT_NE(m.Describe().find("  inject nth=2: 2 requests seen; failed #2 (8.00 KiB (8192 bytes) in setup)\n"),
            std::string::npos)
      << m.Describe();
}

TEST(MeasureInjectAndSnapshot, AFaultThatNeverFiresIsAWarning) {
  const Measurement m = Measure(TwoTensors, Options("meta", "", {"nth=3"}));
  EXPECT_EQ(m.outcome, "pass");
  ASSERT_TRUE(m.injection);
  EXPECT_TRUE(m.injection->failures.empty());
  EXPECT_THAT(m.warnings, ::testing::Contains("inject nth=3 never fired: it saw 2 allocation requests and failed none "
                                              "(a fault that never fires tests nothing)"));
}

TEST(MeasureInjectAndSnapshot, ABadSpecThrowsWithTheParsersText) {
  try {
    Measure(TwoTensors, Options("cpu", "", {"nth=0"}));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "oomguard::Measure: --inject: invalid fault spec 'nth=0': nth must be a whole number >= 1, "
                           "got '0'");
  }
}

TEST(MeasureInjectAndSnapshot, TheSnapshotIsWrittenPassedOrNot) {
  const testing::ScratchFolder folder("measure-snapshot");
  const std::string passed = folder.path() + "/sub/passed.pickle";
  const Measurement m = Measure(TwoTensors, Options("cpu", "1GiB", {}, passed));
  EXPECT_EQ(m.outcome, "pass");
  EXPECT_EQ(m.snapshot, passed);
  EXPECT_EQ(m.snapshot_error, "");
  const std::string bytes = Read(passed);
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(bytes.substr(0, 2), "\x80\x02");  // a pickle, protocol 2
  EXPECT_NE(bytes.find("device_traces"), std::string::npos);

  const std::string failed = folder.path() + "/failed.pickle";
  const Measurement oom = Measure(TwoTensors, Options("meta", "4KiB", {}, failed));
  EXPECT_EQ(oom.outcome, "oom");
  EXPECT_EQ(oom.snapshot, failed);
  EXPECT_NE(Read(failed).find("oom"), std::string::npos);

  try {
    Measure(TwoTensors, Options("cpu", "", {}, folder.path()));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "oomguard::Measure: snapshot " + folder.path() + ": is a folder; expected a file name");
  }
}

}  // namespace
}  // namespace oomguard
