// Inputs a hostile or careless user writes (issue 14): each gets a clear error naming the place and the
// limit, never a crash, a hang or a host that runs out of memory. The limits are base/input_limits.h's;
// every message is compared whole.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/files.h"
#include "base/input_limits.h"
#include "base/scratch_folder.h"
#include "base/json_text.h"
#include "reports/escape.h"
#include "scenario/check_expression.h"
#include "scenario/json_document.h"
#include "scenario/scenario_loader.h"
#include "tests/scenario_text.h"
#include "tests/scoped_environment.h"
#include "tests/scratch_folder.h"

namespace oomguard {
namespace {

using testing::Load;
using testing::LoadError;
using testing::With;

std::string Repeat(const std::string& text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += text;
  return out;
}

std::string CheckError(const std::string& text) {
  CheckExpression check;
  std::string error;
  EXPECT_FALSE(ParseCheckExpression(text, /*relation_mode=*/false, &check, &error)) << text;
  return error;
}

// D1: 20,000 parentheses or 50,000 terms overflowed the stack of the parser, the renderer and the
// evaluator. Both limits are checked before anything recurses.
TEST(HostileInput, CheckExpressionsAreBoundedInLengthAndNesting) {
  EXPECT_EQ(CheckError(Repeat("(", 20000) + "peak" + Repeat(")", 20000) + " >= 1"),
            "at column 2001: longer than 2000 characters (the limit for one check expression; split it into "
            "several checks)");
  EXPECT_EQ(CheckError("1 + " + Repeat("peak + ", 50000) + "1 >= 1"),
            "at column 2001: longer than 2000 characters (the limit for one check expression; split it into "
            "several checks)");
  EXPECT_EQ(CheckError(Repeat("(", 33) + "peak" + Repeat(")", 33) + " >= 1"),
            "at column 33: parentheses nested more than 32 deep (the limit for check expressions)");
  // At the limits, both parse and render: 32 parentheses, and a sum as long as the length allows.
  CheckExpression check;
  std::string error;
  ASSERT_TRUE(ParseCheckExpression(Repeat("(", 32) + "peak" + Repeat(")", 32) + " >= 1", false, &check, &error))
      << error;
  EXPECT_EQ(check.text(), "peak >= 1");
  const std::string sum = "peak" + Repeat("+1", (limits::kMaxCheckExpressionChars - 10) / 2) + " >= 1";
  ASSERT_LE(sum.size(), static_cast<size_t>(limits::kMaxCheckExpressionChars));
  ASSERT_TRUE(ParseCheckExpression(sum, false, &check, &error)) << error;
  EXPECT_EQ(check.text().size(), sum.size() + 2 * ((limits::kMaxCheckExpressionChars - 10) / 2));  // " + "
}

TEST(HostileInput, ACheckPastTheLimitIsALoaderErrorAtItsPath) {
  EXPECT_EQ(LoadError(With("", R"("variants": {"a": {}}, "expect": {"a": {"checks": [")" + Repeat("(", 40) + "peak" +
                                   Repeat(")", 40) + R"( >= 1"]}})")),
            "s.json: at expect.a.checks[0]: at column 33: parentheses nested more than 32 deep (the limit for check "
            "expressions)");
}

// D3: nlohmann throws out_of_range.406 for a number beyond a double, without a position.
TEST(HostileInput, ANumberBeyondADoubleIsASyntaxErrorWithLineAndColumn) {
  EXPECT_EQ(LoadError("{\n  \"name\": \"t\",\n  \"seed\":  1e400\n}\n"),
            "s.json:3:12: JSON syntax error: number 1e400 is out of range (a JSON number here must fit a double, at "
            "most about 1.8e308)");
  EXPECT_EQ(LoadError("[-2e999]"),
            "s.json:1:2: JSON syntax error: number -2e999 is out of range (a JSON number here must fit a double, at "
            "most about 1.8e308)");
}

TEST(HostileInput, JsonNestingIsLimited) {
  const std::string deep = Repeat("[", 100000) + Repeat("]", 100000);
  EXPECT_EQ(
      LoadError(deep),
      "s.json:1:65: JSON syntax error: arrays and objects nested more than 64 deep (the limit for JSON documents)");
  OrderedJson root;
  std::string error;
  EXPECT_TRUE(ParseJsonDocument(Repeat("[", 64) + Repeat("]", 64), "x", &root, &error)) << error;
}

// D5: repeat was limited per layer, not in total.
TEST(HostileInput, TheModelsLayersAreLimitedInTotal) {
  std::string layers = R"({"kind": "linear", "in": 4, "out": 4})";
  for (int i = 0; i < 1000; ++i) layers += R"(, {"kind": "relu", "repeat": 100000})";
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [)" + layers + "]}")),
            "s.json: at model.layers[1].repeat: the model would have more than 10000 layers (1 before this entry, "
            "100000 here; the limit for one model)");
  EXPECT_EQ(
      Load(With(R"("model": {"layers": [{"kind": "linear", "in": 4, "out": 4}, {"kind": "relu", "repeat": 9999}]})"))
          .variants.at(0)
          .model.layers.size(),
      10000u);
}

TEST(HostileInput, VariantsPerScenarioAreLimited) {
  std::string variants = R"("variants": {"v0": {})";
  for (int i = 1; i <= limits::kMaxVariants; ++i) variants += ", \"v" + std::to_string(i) + "\": {}";
  EXPECT_EQ(LoadError(With("", variants + "}")),
            "s.json: at variants: 101 variants, more than 100 (the limit for one scenario; split it into several "
            "files)");
}

// D29: a 300-character name loaded, and then its baseline and snapshot files could never be written
// ("File name too long"): UNRESOLVED, and --update-baselines exited 5.
TEST(HostileInput, ScenarioAndVariantNamesAreLimitedSoTheirFilesCanBeWritten) {
  const std::string at_limit(limits::kMaxNameChars, 'a'), past(limits::kMaxNameChars + 1, 'a');
  auto named = [](const std::string& name, const std::string& variant) {
    std::string text = With("", R"("variants": {")" + variant + R"(": {}})");
    return text.replace(text.find(R"("name": "t")"), 11, R"("name": ")" + name + "\"");
  };
  EXPECT_EQ(Load(named(at_limit, at_limit)).variants.at(0).name, at_limit);
  EXPECT_EQ(LoadError(named(past, "a")),
            "s.json: at name: a name of 101 characters, more than 100 (the limit for scenario and variant names, "
            "which name the baseline and snapshot files)");
  EXPECT_EQ(LoadError(named("t", std::string(300, 'v'))),
            "s.json: at variants: a variant name of 300 characters, more than 100 (the limit for scenario and variant "
            "names, which name the baseline and snapshot files)");
}

// D17: messages that misled.
TEST(HostileInput, MessagesSayWhatIsWrong) {
  EXPECT_EQ(LoadError(With("", R"("variants": {})")),
            "s.json: at variants: expected an object of named variants such as {\"pitfall\": {}, \"fixed\": {...}}, "
            "got an empty object");
  EXPECT_EQ(LoadError(With(R"("teach": ["ok", "red \u001b[31m"])")),
            "s.json: at teach[1]: a control character (U+001B) at byte 5; write plain text (escapes would reach the "
            "console and the reports as they are)");
  EXPECT_EQ(LoadError("{\"name\": \x1b[31m}"),
            "s.json:1:10: JSON syntax error: invalid literal \\x1B (strings need double quotes; the literals are "
            "true, false and null)");
  EXPECT_EQ(LoadError(std::string("{\"name\": \"x\"\0}", 14)),
            "s.json:1:13: JSON syntax error: a NUL byte (0x00), which JSON does not allow outside a string");
}

// D21: numbers beyond float's range were accepted and aborted the child in LibTorch ("value cannot be
// converted to type float without overflow"). Note [Numbers LibTorch computes with in float].
TEST(HostileInput, NumbersLibTorchComputesWithInFloatAreBoundedByItsRange) {
  EXPECT_EQ(LoadError(With(R"("loop": {"clip_grad_norm": 1e308})")),
            "s.json: at loop.clip_grad_norm: expected a max norm > 0, at most 3.4e38 (float's range), got 1e+308");
  EXPECT_EQ(LoadError(With(R"("loop": {"optimizer": {"kind": "sgd", "lr": 1e308}})")),
            "s.json: at loop.optimizer.lr: expected a number > 0, at most 1e18 (the optimizer computes with it in "
            "float), got 1e+308");
  EXPECT_EQ(LoadError(With(R"("loop": {"optimizer": {"kind": "sgd", "momentum": 1e39}})")),
            "s.json: at loop.optimizer.momentum: expected a number >= 0, at most 1e18 (the optimizer computes with it "
            "in float), got 1e+39");
  EXPECT_EQ(LoadError(With(R"("loop": {"optimizer": {"kind": "adamw", "weight_decay": 2e18}})")),
            "s.json: at loop.optimizer.weight_decay: expected a number >= 0, at most 1e18 (the optimizer computes "
            "with it in float), got 2e+18");
  EXPECT_EQ(LoadError(With(R"("model": {"layers": [{"kind": "linear", "in": 4, "out": 4},
                                                 {"kind": "scale", "factor": -1e39}]})")),
            "s.json: at model.layers[1].factor: expected a number within float's range (magnitude at most 3.4e38), "
            "got -1e+39");
  // At the bounds, each loads.
  const VariantSpec at_bounds =
      Load(With(R"("loop": {"clip_grad_norm": 3.4e38, "optimizer": {"kind": "adamw", "lr": 1e18, "weight_decay": 1e18}},
                   "model": {"layers": [{"kind": "linear", "in": 4, "out": 4}, {"kind": "scale", "factor": -3.4e38}]})"))
          .variants.at(0);
  EXPECT_EQ(at_bounds.loop.clip_grad_norm, 3.4e38);
  EXPECT_EQ(at_bounds.loop.optimizer.lr, 1e18);
  EXPECT_EQ(at_bounds.model.layers.at(1).factor, -3.4e38);
}

// D33: inputs accepted and then ignored. A file name with a NUL opened the name cut at the NUL;
// data.classes without cross_entropy and retain_graph without backward were read by nothing.
TEST(HostileInput, WhatNothingWouldReadOrWhatWouldBeCutIsRefused) {
  EXPECT_EQ(LoadError(With(R"("model": {"torchscript": "m.pt\u0000evil"})")),
            "s.json: at model.torchscript: a control character (U+0000) at byte 5; a file name holds none");
  EXPECT_EQ(LoadError(With(R"("model": {"torchscript": "m\n.pt"})")),
            "s.json: at model.torchscript: a control character (U+000A) at byte 2; a file name holds none");
  EXPECT_EQ(LoadError(With(R"("data": {"shape": [4], "classes": 4})")),
            "s.json: at data.classes: data.classes gives cross_entropy its targets; loop.loss is \"mean\", which has "
            "none (leave classes out) (variant a)");
  EXPECT_EQ(LoadError(With(R"("loop": {"backward": false, "retain_graph": true})")),
            "s.json: at loop.retain_graph: retain_graph keeps the graph through backward: loop.backward is false "
            "(variant a)");
  EXPECT_TRUE(Load(With(R"("loop": {"retain_graph": true})")).variants.at(0).loop.retain_graph);
}

TEST(HostileInput, HtmlTextCarriesNoControlCharacters) {
  EXPECT_EQ(HtmlEscape("a\x1b[31mb\tc\n"), "a\xEF\xBF\xBD[31mb\tc\n");
}

// D2: invalid UTF-8 aborted every JSON writer (nlohmann's type_error.316).
TEST(HostileInput, InvalidUtf8IsReplacedInJsonText) {
  EXPECT_EQ(DumpJson(nlohmann::json{{"file", "d/\xff\xfeok.json"}}),
            "{\"file\":\"d/\xef\xbf\xbd\xef\xbf\xbdok.json\"}");
  const std::string error = LoadError("{\"name\": \xff\xfe\xfd }");
  EXPECT_EQ(
      DumpJson(nlohmann::json(error)),
      "\"s.json:1:10: JSON syntax error: invalid literal \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd (strings need double "
      "quotes; the literals are true, false and null)\"");
}

// D4: reads had no size limit and no file-type check.
// Scratch folders go where TMPDIR says when it names an absolute folder (CI runners often point it at
// a disk of their own), or to /tmp when it is unset or empty.
// D27 (issue 35): a TMPDIR that was relative, missing or a file fell back to /tmp silently, and a
// folder that could not be made was "cannot create a temporary folder in /tmp" whatever TMPDIR was,
// without the reason. Now each names TMPDIR or the folder tried, and why (Note [TMPDIR is input]).
TEST(HostileInput, ScratchFoldersGoToTmpdirWhenItNamesAFolder) {
  testing::ScratchFolder folder("tmpdir");
  testing::ScopedEnvironment env({"TMPDIR"});
  std::string root, error;
  ASSERT_TRUE(TemporaryFolder(&root, &error)) << error;
  EXPECT_EQ(root, "/tmp");
  env.Set("TMPDIR", "");
  ASSERT_TRUE(TemporaryFolder(&root, &error)) << error;
  EXPECT_EQ(root, "/tmp");
  env.Set("TMPDIR", folder.path() + "//");
  ASSERT_TRUE(TemporaryFolder(&root, &error)) << error;
  EXPECT_EQ(root, folder.path());
  {
    ScratchFolder scratch;
    ASSERT_TRUE(scratch.Create("oomguard-run", &error)) << error;
    EXPECT_EQ(scratch.path().rfind(folder.path() + "/oomguard-run-" + std::to_string(getpid()) + "-", 0), 0u)
        << scratch.path();
  }
  const std::string file = folder.Write("file", "x");
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"relative/dir", "not an absolute path"},
           {folder.path() + "/missing", "No such file or directory"},
           {file, "not a folder"},
           {file + "/below", "Not a directory"}}) {
    env.Set("TMPDIR", bad);
    EXPECT_FALSE(TemporaryFolder(&root, &error)) << bad;
    EXPECT_EQ(error, "TMPDIR=" + bad + ": " + why);
    ScratchFolder scratch;
    EXPECT_FALSE(scratch.Create("oomguard-run", &error)) << bad;
    EXPECT_EQ(error, "TMPDIR=" + bad + ": " + why);
  }
  // A folder nothing can be created in, even by root: /proc.
  env.Set("TMPDIR", "/proc");
  ScratchFolder scratch;
  EXPECT_FALSE(scratch.Create("oomguard-run", &error));
  EXPECT_EQ(error.rfind("cannot create a scratch folder in /proc: ", 0), 0u) << error;
  EXPECT_GT(error.size(), std::string("cannot create a scratch folder in /proc: ").size()) << error;
}

TEST(HostileInput, ReadFileTakesOnlyRegularFilesWithinTheLimit) {
  testing::ScratchFolder folder("hostile");
  std::string text, error;
  EXPECT_FALSE(ReadFile("/dev/zero", &text, &error));
  EXPECT_EQ(error, "/dev/zero: not a regular file (a character device)");
  const std::string fifo = folder.path() + "/p.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_FALSE(ReadFile(fifo, &text, &error));  // returns at once: no writer is waited for
  EXPECT_EQ(error, fifo + ": not a regular file (a FIFO)");
  EXPECT_FALSE(ReadFile(folder.path(), &text, &error));
  EXPECT_EQ(error, folder.path() + ": not a regular file (a folder)");
  const std::string big = folder.path() + "/big.json";
  const int fd = open(big.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, limits::kMaxInputFileBytes + 1), 0);  // sparse: costs no disk
  close(fd);
  EXPECT_FALSE(ReadFile(big, &text, &error));
  EXPECT_EQ(error, big + ": too large (16.00 MiB; the limit for input files is 16.00 MiB)");
  const std::string link = folder.path() + "/zero.json";
  ASSERT_EQ(symlink("/dev/zero", link.c_str()), 0);
  Scenario scenario;
  EXPECT_FALSE(LoadScenarioFile(link, &scenario, &error));
  EXPECT_EQ(error, link + ": not a regular file (a character device)");
}

// D13: entries named *.json that were not readable files vanished from a folder's scenarios.
TEST(HostileInput, AFolderListsEveryJsonEntryWhateverItIs) {
  testing::ScratchFolder folder("hostile");
  folder.Write("good.json", "{}");
  const std::string dir = folder.path();
  ASSERT_EQ(symlink("missing-target.json", (dir + "/dangling.json").c_str()), 0);
  ASSERT_EQ(symlink("loop.json", (dir + "/loop.json").c_str()), 0);
  ASSERT_EQ(mkdir((dir + "/folder.json").c_str(), 0755), 0);
  ASSERT_EQ(mkfifo((dir + "/fifo.json").c_str(), 0644), 0);
  folder.Write("notes.md", "");
  std::vector<std::string> files;
  std::string error;
  ASSERT_TRUE(FindScenarioFiles({dir}, &files, &error)) << error;
  EXPECT_EQ(files, (std::vector<std::string>{dir + "/dangling.json", dir + "/fifo.json", dir + "/folder.json",
                                             dir + "/good.json", dir + "/loop.json"}));
  Scenario scenario;
  EXPECT_FALSE(LoadScenarioFile(dir + "/dangling.json", &scenario, &error));
  EXPECT_EQ(error, dir + "/dangling.json: cannot read: No such file or directory");
  EXPECT_FALSE(LoadScenarioFile(dir + "/loop.json", &scenario, &error));
  EXPECT_EQ(error, dir + "/loop.json: cannot read: Too many levels of symbolic links");
  EXPECT_FALSE(LoadScenarioFile(dir + "/folder.json", &scenario, &error));
  EXPECT_EQ(error, dir + "/folder.json: is a folder, not a scenario file");
  EXPECT_FALSE(LoadScenarioFile(dir + "/fifo.json", &scenario, &error));
  EXPECT_EQ(error, dir + "/fifo.json: not a regular file (a FIFO)");
}

}  // namespace
}  // namespace oomguard
