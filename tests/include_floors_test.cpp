// The floors the build is cut along, checked from the sources themselves: every `#include "dir/..."`
// of a project folder may name only its own folder or a folder on a lower floor. The floors are
// written down once, in README.md's layout table (`| \`base/\` | 0 | ...`); a folder of sources missing
// from that table, or an include of a folder that has no floor (tests/, bench/), is a failure too.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

// Folder -> floor, from the rows of README's layout table whose second cell is a number.
std::map<std::string, int> FloorsFromReadme(const std::string& readme) {
  std::map<std::string, int> floors;
  std::istringstream in(readme);
  const std::regex row(R"(^\| `([a-z_]+)/` \| ([0-9]+) \|)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) floors[m[1]] = std::stoi(m[2]);
  }
  return floors;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  return names;
}

bool IsSource(const std::string& name) {
  return name.ends_with(".h") || name.ends_with(".cpp") || name.ends_with(".h.in");
}

void SourcesUnder(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  for (const std::string& name : Entries(root + "/" + rel)) {
    const std::string path = rel + "/" + name;
    if (IsDirectory(root + "/" + path)) {
      // python/build/: `pip install ./python`'s build tree (.gitignore), generated sources of no floor.
      if (name == "build" || name.starts_with("build-")) continue;
      SourcesUnder(root, path, out);
    } else if (IsSource(name)) {
      out->push_back(path);
    }
  }
}

// One line per violation, "file:line: message", sorted; empty when the tree keeps its floors.
std::vector<std::string> FloorViolations(const std::string& root, const std::map<std::string, int>& floors,
                                         const std::set<std::string>& unfloored) {
  std::vector<std::string> problems;
  std::set<std::pair<std::string, std::string>> edges;
  for (const std::string& top : Entries(root)) {
    // build-*/: other build trees (.gitignore), e.g. the Python package's (README, "Your own Python
    // training code"), whose generated sources are no floor's.
    if (!IsDirectory(root + "/" + top) || top.starts_with(".") || top.starts_with("build-") || unfloored.count(top))
      continue;
    std::vector<std::string> sources;
    SourcesUnder(root, top, &sources);
    if (sources.empty()) continue;
    if (!floors.count(top)) {
      problems.push_back(top + "/: holds sources but has no floor in README's layout table");
      continue;
    }
    for (const std::string& file : sources) {
      std::ifstream in(root + "/" + file);
      int number = 0;
      for (std::string line; std::getline(in, line);) {
        ++number;
        static const std::regex include(R"(^\s*#\s*include\s+"([a-z_]+)/)");
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string target = m[1];
        if (target == top) continue;
        const std::string where = file + ":" + std::to_string(number) + ": ";
        const auto floor = floors.find(target);
        if (floor == floors.end()) {
          problems.push_back(where + top + "/ includes " + target + "/, which has no floor");
          continue;
        }
        edges.insert({top, target});
        if (floor->second >= floors.at(top)) {
          problems.push_back(where + top + "/ (floor " + std::to_string(floors.at(top)) + ") includes " + target +
                             "/ (floor " + std::to_string(floor->second) + "): only lower floors may be included");
        }
      }
    }
  }
  for (const auto& [from, to] : edges) {
    if (from < to && edges.count({to, from})) problems.push_back(from + "/ and " + to + "/ include each other");
  }
  std::sort(problems.begin(), problems.end());
  return problems;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::set<std::string> kUnfloored = {"tests", "bench", "fuzz", "scenarios", "ci", "build", "examples"};

TEST(IncludeFloors, ReadmeGivesEveryFolderOfSourcesAFloor) {
  const std::map<std::string, int> floors = FloorsFromReadme(ReadAll(std::string(OOMGUARD_SOURCE_DIR) + "/README.md"));
  EXPECT_EQ(floors.at("base"), 0);
  EXPECT_EQ(floors.at("allocators"), 1);
  EXPECT_EQ(floors.at("cli"), 7);
  EXPECT_EQ(floors.at("diagnose"), 4);  // below workload/, which tells the observer where the loop is
  EXPECT_EQ(floors.at("oomguard"), 0);  // the public headers include nothing of ours
  EXPECT_EQ(floors.at("ops"), 2);       // below nn/, backends/ and diagnose/, whose observers subscribe to it
  EXPECT_EQ(floors.size(), 20u);
}

TEST(IncludeFloors, NoIncludeRunsUpAFloorOrAcrossOne) {
  const std::map<std::string, int> floors = FloorsFromReadme(ReadAll(std::string(OOMGUARD_SOURCE_DIR) + "/README.md"));
  ASSERT_FALSE(floors.empty());
  const std::vector<std::string> problems = FloorViolations(OOMGUARD_SOURCE_DIR, floors, kUnfloored);
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
}

TEST(IncludeFloors, AnUpwardIncludeASameFloorCycleAndAnUnflooredFolderAreEachReported) {
  testing::ScratchFolder tree("floors");
  for (const char* dir : {"/low", "/high", "/left", "/right", "/stray", "/tests"})
    mkdir((tree.path() + dir).c_str(), 0755);
  tree.Write("low/a.h", "#pragma once\n#include \"high/b.h\"\n");
  tree.Write("high/b.h", "#include \"low/a.h\"\n#include \"high/c.h\"\n#include \"tests/t.h\"\n");
  tree.Write("left/l.h", "#include \"right/r.h\"\n");
  tree.Write("right/r.h", "  #  include \"left/l.h\"\n");
  tree.Write("stray/s.cpp", "int x;\n");
  tree.Write("tests/t.h", "#include \"high/b.h\"\n");
  const std::map<std::string, int> floors = {{"low", 0}, {"high", 1}, {"left", 2}, {"right", 2}};
  EXPECT_EQ(FloorViolations(tree.path(), floors, {"tests"}),
            (std::vector<std::string>{
                "high/ and low/ include each other",
                "high/b.h:3: high/ includes tests/, which has no floor",
                "left/ and right/ include each other",
                "left/l.h:1: left/ (floor 2) includes right/ (floor 2): only lower floors may be included",
                "low/a.h:2: low/ (floor 0) includes high/ (floor 1): only lower floors may be included",
                "right/r.h:1: right/ (floor 2) includes left/ (floor 2): only lower floors may be included",
                "stray/: holds sources but has no floor in README's layout table",
            }));
}

}  // namespace
}  // namespace oomguard
