// Writes the fuzzers' seed corpora from the catalog, so the seeds follow it:
//   make_seeds OUT --scenarios FILE... --baselines FILE...
// OUT/scenario_loader/ and OUT/baseline_reader/: the files as they are; OUT/check_expression/: every
// check of the scenarios that load (relations and expectations); OUT/cap_inject/: their cards and caps,
// every card key, and the documented --cap and --inject spellings. Each folder is emptied first.
#include <sys/stat.h>

#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include "allocators/cards.h"
#include "base/files.h"
#include "scenario/scenario_loader.h"

namespace {

const char* const kCapInjectExamples[] = {
    "12GiB",
    "15.5GB",
    "1e9",
    "12 GiB",
    "512MiB",
    "1024",
    "0",
    "A100-80",
    "3090",
    "h100-sxm",
    "nth=1",
    "min-size=64MiB",
    "p=0.01,seed=7",
    "phase=backward,nth=2",
    "p=1",
    "phase=eval",
    "phase=forward,min-size=1KiB,p=0.5,seed=3",
};

class SeedFolder {
 public:
  explicit SeedFolder(const std::string& path) : path_(path) {
    oomguard::RemoveFolderOfFiles(path_);
    mkdir(path_.c_str(), 0755);
  }
  // Writes `content` under a name made from `stem`, once: a repeated content is skipped.
  void Add(const std::string& stem, const std::string& content) {
    if (!contents_.insert(content).second) return;
    std::ofstream(path_ + "/" + std::to_string(contents_.size()) + "-" + stem, std::ios::binary) << content;
  }

 private:
  std::string path_;
  std::set<std::string> contents_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: make_seeds OUT --scenarios FILE... --baselines FILE...\n";
    return 2;
  }
  const std::string out = argv[1];
  mkdir(out.c_str(), 0755);
  SeedFolder scenarios(out + "/scenario_loader"), baselines(out + "/baseline_reader"),
      checks(out + "/check_expression"), cap_inject(out + "/cap_inject");
  for (const char* example : kCapInjectExamples) cap_inject.Add("example", example);
  for (const oomguard::CardPreset& card : oomguard::AllCards()) cap_inject.Add("card", std::string(card.key));

  std::string mode;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--scenarios" || arg == "--baselines") {
      mode = arg;
      continue;
    }
    std::string text, error;
    if (mode.empty() || !oomguard::ReadFile(arg, &text, &error)) {
      std::cerr << "make_seeds: " << (mode.empty() ? arg + ": --scenarios or --baselines must come first" : error)
                << "\n";
      return 2;
    }
    const std::string name = oomguard::Stem(arg);
    if (mode == "--baselines") {
      baselines.Add(name + ".json", text);
      continue;
    }
    scenarios.Add(name + ".json", text);
    oomguard::Scenario scenario;
    if (!oomguard::LoadScenarioText(text, arg, &scenario, &error)) continue;  // a broken file is a seed too
    for (const oomguard::ScenarioCheck& check : scenario.checks) checks.Add(name, check.expression);
    for (const auto& [variant, expectation] : scenario.expectations) {
      for (const oomguard::ScenarioCheck& check : expectation.checks)
        checks.Add(name + "." + variant, check.expression);
    }
    if (!scenario.card.empty()) cap_inject.Add(name + ".card", scenario.card);
    if (!scenario.cap.empty()) cap_inject.Add(name + ".cap", scenario.cap);
  }
  return 0;
}
