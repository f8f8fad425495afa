// What the runner tests share (runner_test.cpp, baseline_update_test.cpp): a tiny scenario that fits,
// and a fixture that writes files into a scratch folder and runs scenarios through the real CLI.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "run/runner.h"
#include "scratch_folder.h"

namespace oomguard {

inline constexpr const char* kTinyScenario = R"({
  "name": "tiny",
  "summary": "a tiny model that fits",
  "model": {"layers": [{"kind": "linear", "in": 4, "out": 8}, {"kind": "relu"}, {"kind": "linear", "in": 8, "out": 2}]},
  "data": {"batch": 3, "shape": [4], "on_host": false},
  "loop": {"iterations": 2, "loss": "mean", "optimizer": {"kind": "sgd"}},
  "variants": {"base": {}, "wider": {"data": {"batch": 6}}},
  "checks": ["wider.peak > base.peak"]
})";

class RunnerTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content, bool executable = false) {
    return folder_.Write(name, content, executable);
  }
  RunResults Run(RunOptions options, const std::string& self = OOMGUARD_EXE) {
    RunResults report;
    std::string error;
    EXPECT_TRUE(RunScenarios(options, self, nullptr, &report, &error)) << error;
    return report;
  }
  testing::ScratchFolder folder_{"runner"};
  const std::string dir_ = folder_.path();
};

}  // namespace oomguard
