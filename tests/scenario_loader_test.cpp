// The scenario loader (scenario/scenario_loader.h) on valid input: the FORMAT.md example, defaults,
// variants merged over the base, and finding and reading files. Its error messages are tested in
// scenario_loader_errors_test.cpp and scenario_loader_rules_test.cpp.
#include "scenario/scenario_loader.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tests/scenario_text.h"

namespace oomguard {
namespace {

using testing::kExample;
using testing::Load;
using testing::LoadError;
using testing::With;

TEST(ScenarioLoader, LoadsTheFormatExample) {
  Scenario s = Load(kExample);
  EXPECT_EQ(s.name, "forgotten-no-grad");
  EXPECT_EQ(s.file, "s.json");
  EXPECT_EQ(s.teach.substr(0, 26), "Outside torch::NoGradGuard");
  EXPECT_EQ(std::count(s.teach.begin(), s.teach.end(), '\n'), 2);
  EXPECT_EQ(s.backends, (std::vector<std::string>{"cpu", "meta", "cuda"}));
  EXPECT_EQ(s.card, "t4");
  ASSERT_EQ(s.variants.size(), 2u);
  EXPECT_EQ(s.variants[0].name, "pitfall");
  EXPECT_EQ(s.variants[1].name, "fixed");
  EXPECT_FALSE(s.variants[0].loop.eval.no_grad);
  EXPECT_TRUE(s.variants[1].loop.eval.no_grad);
  for (const VariantSpec& v : s.variants) {
    EXPECT_EQ(v.loop.eval.batches, 8);
    EXPECT_TRUE(v.loop.eval.keep_outputs);
    EXPECT_EQ(v.loop.optimizer.kind, "adam");
    EXPECT_EQ(v.model.layers.size(), 5u);
    EXPECT_EQ(v.data.classes, 10);
  }
  EXPECT_EQ(s.expectations.at("pitfall").checks, (std::vector<ScenarioCheck>{{"phase_peak.eval > phase_peak.forward"}}));
  EXPECT_EQ(Name(s.expectations.at("fixed").outcome), "pass");
  EXPECT_EQ(s.checks.size(), 1u);
}

TEST(ScenarioLoader, TheFormatPageShowsTheTestedExample) {
  // Not __FILE__: with CCACHE_BASEDIR (ci/build.sh) it is relative to the build folder.
  const std::string page_path = std::string(OOMGUARD_SOURCE_DIR) + "/scenarios/FORMAT.md";
  std::ifstream in(page_path);
  ASSERT_TRUE(in) << page_path;
  std::stringstream page;
  page << in.rdbuf();
  EXPECT_NE(page.str().find(kExample), std::string::npos) << "update FORMAT.md's example from kExample";
}

TEST(ScenarioLoader, FillsDefaults) {
  Scenario s = Load(With(""));
  EXPECT_EQ(s.backends, std::vector<std::string>{"cpu"});
  EXPECT_EQ(s.card, "");
  EXPECT_EQ(s.cap, "");
  EXPECT_EQ(s.teach, "");
  ASSERT_EQ(s.variants.size(), 1u);
  const VariantSpec& v = s.variants[0];
  EXPECT_EQ(v.name, "a");
  EXPECT_EQ(v.seed, 0);
  EXPECT_EQ(Name(v.model.dtype), "float32");
  EXPECT_EQ(v.data.batch, 1);
  EXPECT_TRUE(v.data.on_host);
  EXPECT_EQ(v.loop.iterations, 2);
  EXPECT_EQ(v.loop.loss, "mean");
  EXPECT_EQ(v.loop.optimizer.kind, "sgd");
  EXPECT_EQ(v.loop.optimizer.lr, 1e-3);
  EXPECT_EQ(v.loop.eval.batches, 0);
  EXPECT_EQ(v.pitfalls.inplace.target, "none");
  EXPECT_EQ(v.pitfalls.transfer, "outside");
  EXPECT_TRUE(v.model.layers[0].bias);
  const VariantExpectation& e = s.expectations.at("a");  // every variant has one
  EXPECT_EQ(Name(e.outcome), "pass");
  EXPECT_FALSE(e.leak);
  EXPECT_FALSE(e.xfail.has_value());
  EXPECT_TRUE(s.checks.empty());
}

TEST(ScenarioLoader, AVariantOverridingOneNestedFieldKeepsTheRestOfTheBase) {
  Scenario s = Load(With(R"("seed": 7, "loop": {"iterations": 3, "eval": {"batches": 2, "keep_outputs": true}})",
                         R"("variants": {"pitfall": {"loop": {"eval": {"no_grad": false}}}, "fixed": {}})"));
  const VariantSpec& pitfall = s.variants[0];
  EXPECT_EQ(pitfall.seed, 7);
  EXPECT_EQ(pitfall.loop.iterations, 3);
  EXPECT_EQ(pitfall.loop.eval.batches, 2);
  EXPECT_TRUE(pitfall.loop.eval.keep_outputs);
  EXPECT_FALSE(pitfall.loop.eval.no_grad);
  EXPECT_TRUE(s.variants[1].loop.eval.no_grad);
}

TEST(ScenarioLoader, AVariantReplacesArraysWholeAndNullRestoresADefault) {
  Scenario s = Load(With(
      R"("model": {"dtype": "bfloat16", "layers": [{"kind": "linear", "in": 4, "out": 8}, {"kind": "relu"},
                                                  {"kind": "linear", "in": 8, "out": 2}]},
         "loop": {"iterations": 5})",
      R"("variants": {"small": {"model": {"layers": [{"kind": "linear", "in": 4, "out": 3, "bias": false}]},
                                "loop": {"iterations": null}}})"));
  const VariantSpec& v = s.variants[0];
  ASSERT_EQ(v.model.layers.size(), 1u);
  EXPECT_EQ(v.model.layers[0].out, 3);
  EXPECT_FALSE(v.model.layers[0].bias);
  EXPECT_EQ(Name(v.model.dtype), "bfloat16");
  EXPECT_EQ(v.loop.iterations, 2);
}

TEST(ScenarioLoader, ReadsTheScenarioKeys) {
  Scenario s = Load(With(R"("teach": "one line", "backends": ["meta"], "cap": "12GiB")"));
  EXPECT_EQ(s.teach, "one line");
  EXPECT_EQ(s.backends, std::vector<std::string>{"meta"});
  EXPECT_EQ(s.cap, "12GiB");
  EXPECT_EQ(Load(With(R"("cap": 1000000000)")).cap, "1000000000");
  Scenario e = Load(With(R"("expect": {"a": {"outcome": "error:inplace-saved-tensor", "leak": true,
                                              "checks": ["peak <= 1MiB"], "xfail": "issue 12"}})"));
  const VariantExpectation& a = e.expectations.at("a");
  EXPECT_EQ(Name(a.outcome), "error:inplace-saved-tensor");
  EXPECT_TRUE(a.leak);
  EXPECT_EQ(a.checks, std::vector<ScenarioCheck>{{"peak <= 1MiB"}});
  EXPECT_EQ(a.xfail, std::optional<std::string>("issue 12"));
}

// A temporary folder with a subfolder "sub", removed at the end of the test. POSIX calls, not
// std::filesystem: see Note [No std::filesystem] in base/files.h.
class TempFolder {
 public:
  TempFolder() {
    char name[] = "/tmp/oomguard_loader_XXXXXX";
    path_ = mkdtemp(name);
    mkdir((path_ + "/sub").c_str(), 0700);
  }
  ~TempFolder() {
    for (const std::string& dir : {path_ + "/sub", path_}) {
      if (DIR* d = opendir(dir.c_str())) {
        while (const dirent* entry = readdir(d)) unlink((dir + "/" + entry->d_name).c_str());
        closedir(d);
      }
      rmdir(dir.c_str());
    }
  }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ + "/" + name) << text;
    return path_ + "/" + name;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ScenarioLoader, FindsTheJsonFilesDirectlyInsideFolders) {
  TempFolder folder;
  const std::string b = folder.Write("b.json", "{}");
  const std::string a = folder.Write("a.json", "{}");
  folder.Write("FORMAT.md", "# format");
  folder.Write("sub/c.json", "{}");
  const std::string other = folder.Write("sub/other.txt", "{}");
  std::vector<std::string> files;
  std::string error;
  ASSERT_TRUE(FindScenarioFiles({folder.path(), other, a}, &files, &error)) << error;
  EXPECT_EQ(files, (std::vector<std::string>{a, b, other}));
  EXPECT_FALSE(FindScenarioFiles({folder.path() + "/missing.json"}, &files, &error));
  EXPECT_EQ(error, folder.path() + "/missing.json: no such file or folder");
}

TEST(ScenarioLoader, LoadsFilesAndNamesTheFileInErrors) {
  TempFolder folder;
  const std::string good = folder.Write("good.json", kExample);
  const std::string bad = folder.Write("bad.json", With(R"("seed": "x")"));
  Scenario s;
  std::string error;
  ASSERT_TRUE(LoadScenarioFile(good, &s, &error)) << error;
  EXPECT_EQ(s.file, good);
  EXPECT_FALSE(LoadScenarioFile(bad, &s, &error));
  EXPECT_EQ(error, bad + ": at seed: expected an integer >= 0, got string \"x\"");
  EXPECT_EQ(s.file, good);  // unchanged by a failed load
  EXPECT_FALSE(LoadScenarioFile(folder.path() + "/none.json", &s, &error));
  EXPECT_EQ(error, folder.path() + "/none.json: cannot read: No such file or directory");
  const std::string empty = folder.Write("empty.json", "");
  EXPECT_FALSE(LoadScenarioFile(empty, &s, &error));
  EXPECT_EQ(error, empty + ":1:1: JSON syntax error: unexpected end of input; expected '[', '{', or a literal");
  EXPECT_FALSE(LoadScenarioFile(folder.path(), &s, &error));
  EXPECT_EQ(error, folder.path() + ": is a folder, not a scenario file");
}

}  // namespace
}  // namespace oomguard
