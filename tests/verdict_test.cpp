// The verdict: evidence in, codes out, each decided once. XFail follows lit: the mark applies to the
// final code, so an xfail variant that fails for any reason (a baseline regression included) is XFAIL
// and one that passes is XPASS; a crash or a timeout stays what it is.
#include "verdict/verdict.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <sstream>

namespace oomguard {
namespace {

VariantMeasurement Passing(const std::string& variant, int64_t peak) {
  VariantMeasurement m;
  m.variant = variant;
  m.backend = "cpu";
  m.ledger.peak_bytes = peak;
  m.iterations = {{peak, 50, 40}, {peak, 50, 40}};
  return m;
}

VariantEvidence Evidence(const std::string& name, bool xfail) {
  VariantEvidence e;
  e.name = name;
  if (xfail) e.expectation.xfail = "known bug";
  e.measurement = Passing(name, 1000);
  return e;
}

const char* kRegression = "regression: peak_bytes 1100 bytes vs baseline 1000 bytes (+100 bytes, +10.0%)";

struct XFailCase {
  const char* what;
  bool xfail;
  bool outcome_fails;  // the child reported an OOM where a pass was expected
  bool regressed;      // the baseline comparison holds a failure
  ResultCode code;
  std::vector<std::string> reasons;
};

TEST(Verdict, XFailAppliesToTheFinalCode) {
  const std::string oom = "expected outcome pass, got oom: CUDA out of memory";
  const std::vector<XFailCase> cases = {
      {"passes", false, false, false, ResultCode::kPass, {}},
      {"regresses", false, false, true, ResultCode::kFail, {kRegression}},
      {"ooms and regresses", false, true, true, ResultCode::kFail, {oom, kRegression}},
      {"xfail, passes", true, false, false, ResultCode::kXPass, {"marked xfail (known bug) but passed"}},
      {"xfail, ooms", true, true, false, ResultCode::kXFail, {oom}},
      {"xfail, regresses only", true, false, true, ResultCode::kXFail, {kRegression}},
      {"xfail, ooms and regresses", true, true, true, ResultCode::kXFail, {oom, kRegression}},
  };
  for (const XFailCase& c : cases) {
    VariantEvidence e = Evidence("v", c.xfail);
    if (c.outcome_fails) {
      e.measurement->outcome = VariantOutcome::Oom();
      e.measurement->error = "CUDA out of memory";
    }
    if (c.regressed) e.baseline_failures = {kRegression};
    const VariantResult r = JudgeVariant(e);
    EXPECT_EQ(r.code, c.code) << c.what << ": " << ResultName(r.code);
    EXPECT_EQ(r.reasons, c.reasons) << c.what;
    EXPECT_EQ(r.xfail_reason, c.xfail ? "known bug" : "") << c.what;
  }
}

TEST(Verdict, StrictMissingBaselineOnAnXFailVariantIsXFail) {
  VariantEvidence e = Evidence("v", /*xfail=*/true);
  e.baseline.verdict = BaselineVerdict::kNew;
  e.baseline_failures = {"no baseline in b.json (--strict); record one with --update-baselines"};
  const VariantResult r = JudgeVariant(e);
  EXPECT_EQ(r.code, ResultCode::kXFail);
  EXPECT_EQ(r.baseline.verdict, BaselineVerdict::kNew);
  EXPECT_EQ(r.reasons, e.baseline_failures);
}

TEST(Verdict, AChildThatDidNotReportKeepsItsCodeEvenWhenMarkedXFail) {
  for (const bool timed_out : {false, true}) {
    VariantEvidence e = Evidence("v", /*xfail=*/true);
    e.measurement.reset();
    e.timed_out = timed_out;
    e.exit = timed_out ? "timed out after 1 s" : "crashed with signal 11 (Segmentation fault)";
    e.diagnostics = "Segmentation fault";
    const VariantResult r = JudgeVariant(e);
    EXPECT_EQ(r.code, timed_out ? ResultCode::kTimeout : ResultCode::kUnresolved);
    EXPECT_EQ(r.reasons, std::vector<std::string>{e.exit});
    EXPECT_EQ(r.diagnostics, "Segmentation fault");
    EXPECT_FALSE(r.measurement.has_value());
  }
}

TEST(Verdict, TheScenarioIsTheWorstOfItsFinalVariantCodesAndRelations) {
  Scenario scenario;
  scenario.checks = {{"b.peak > a.peak"}};
  ScenarioResult header;
  header.name = "s";
  header.backend = "cpu";
  ScenarioEvidence evidence;
  evidence.variants = {Evidence("a", false), Evidence("b", /*xfail=*/true)};
  evidence.variants[1].baseline_failures = {kRegression};
  const ScenarioResult judged = JudgeScenario(scenario, header, evidence);
  ASSERT_EQ(judged.variants.size(), 2u);
  EXPECT_EQ(judged.variants[0].code, ResultCode::kPass);
  EXPECT_EQ(judged.variants[1].code, ResultCode::kXFail);  // the regression does not overwrite XFAIL
  ASSERT_EQ(judged.checks.size(), 1u);
  EXPECT_FALSE(judged.checks[0].holds);  // 1000 > 1000
  EXPECT_EQ(judged.code, ResultCode::kFail);

  scenario.checks = {{"b.peak >= a.peak"}};
  EXPECT_EQ(JudgeScenario(scenario, header, evidence).code, ResultCode::kXFail);

  evidence.baseline_error = "corrupt baseline: b.json: not JSON";
  const ScenarioResult corrupt = JudgeScenario(scenario, header, evidence);
  EXPECT_EQ(corrupt.code, ResultCode::kUnresolved);
  EXPECT_EQ(corrupt.error, "corrupt baseline: b.json: not JSON");
}

// --filter SCENARIO/VARIANT left variant b out: a relation naming it is skipped with the reason, one
// naming only what ran is judged.
TEST(Verdict, ARelationNamingAVariantTheFilterLeftOutIsSkipped) {
  Scenario scenario;
  scenario.checks = {{"b.peak > a.peak"}, {"a.peak > 2000"}};
  scenario.left_out = {"b"};
  ScenarioResult header;
  header.name = "s";
  header.backend = "cpu";
  ScenarioEvidence evidence;
  evidence.variants = {Evidence("a", false)};
  const ScenarioResult judged = JudgeScenario(scenario, header, evidence);
  ASSERT_EQ(judged.checks.size(), 2u);
  EXPECT_TRUE(judged.checks[0].skipped);
  EXPECT_EQ(judged.checks[0].explanation, "b.peak > a.peak: skipped (names b, which --filter left out)");
  EXPECT_FALSE(judged.checks[1].skipped);
  EXPECT_FALSE(judged.checks[1].holds);  // 1000 > 2000: still judged
  EXPECT_EQ(judged.code, ResultCode::kFail);
  scenario.checks.pop_back();
  EXPECT_EQ(JudgeScenario(scenario, header, evidence).code, ResultCode::kPass);
}

// Note [Whose kernels a check is for]: a check for cpu's kernels is skipped, with the reason, where a
// card's kernels measured the variants it reads ("cuda sm_75", meta --kernels cuda; "cuda", a GPU's),
// and judged where cpu's did; a check for "cuda" the other way round; one that names none is judged
// everywhere. Both variants peak at 1000 bytes, so "a.peak > 2000" fails wherever it is judged.
TEST(Verdict, ACheckForOtherKernelsThanTheMeasurementsIsSkippedWithTheReason) {
  Scenario scenario;
  scenario.checks = {{"a.peak > 2000", "cpu"}, {"b.peak == a.peak", "cuda"}, {"b.peak > 2000"}};
  ScenarioResult header;
  header.name = "s";
  header.backend = "meta";
  for (const std::string kernels : {"cuda sm_75", "cuda"}) {
    ScenarioEvidence evidence;
    evidence.variants = {Evidence("a", false), Evidence("b", false)};
    for (VariantEvidence& v : evidence.variants) v.measurement->kernels = kernels;
    evidence.variants[1].expectation.checks = {{"peak > 2000", "cpu"}, {"peak == 1000", "cuda"}};
    const ScenarioResult judged = JudgeScenario(scenario, header, evidence);
    ASSERT_EQ(judged.checks.size(), 3u);
    EXPECT_TRUE(judged.checks[0].skipped);
    EXPECT_EQ(judged.checks[0].explanation,
              "a.peak > 2000: skipped (for cpu kernels; measured with " + kernels + " kernels)");
    EXPECT_FALSE(judged.checks[1].skipped);
    EXPECT_TRUE(judged.checks[1].holds);
    EXPECT_FALSE(judged.checks[2].skipped);  // no kernels named: judged, and 1000 > 2000 fails
    EXPECT_FALSE(judged.checks[2].holds);
    const VariantResult& b = judged.variants[1];
    ASSERT_EQ(b.checks.size(), 2u);
    EXPECT_TRUE(b.checks[0].skipped);
    EXPECT_EQ(b.checks[0].explanation, "peak > 2000: skipped (for cpu kernels; measured with " + kernels + " kernels)");
    EXPECT_TRUE(b.checks[1].holds);
    EXPECT_EQ(b.code, ResultCode::kPass);
    EXPECT_EQ(judged.code, ResultCode::kFail);  // by the check that names no kernels alone
  }
  scenario.checks.pop_back();
  ScenarioEvidence cpu;
  cpu.variants = {Evidence("a", false), Evidence("b", false)};  // measured with cpu's kernels
  cpu.variants[1].expectation.checks = {{"peak == 1000", "cpu"}, {"peak > 2000", "cuda"}};
  const ScenarioResult judged = JudgeScenario(scenario, header, cpu);
  EXPECT_FALSE(judged.checks[0].skipped);  // cpu's check judged on cpu's numbers: 1000 > 2000 fails
  EXPECT_EQ(judged.checks[1].explanation, "b.peak == a.peak: skipped (for cuda kernels; measured with cpu kernels)");
  EXPECT_EQ(judged.variants[1].checks[1].explanation,
            "peak > 2000: skipped (for cuda kernels; measured with cpu kernels)");
  EXPECT_EQ(judged.variants[1].code, ResultCode::kPass);
  EXPECT_EQ(judged.code, ResultCode::kFail);
  scenario.checks.erase(scenario.checks.begin());
  EXPECT_EQ(JudgeScenario(scenario, header, cpu).code, ResultCode::kPass);
}

TEST(Verdict, DiagnosesMustBeExactlyTheExpectedKindsAdviceOnlyWhenNamed) {
  VariantEvidence e = Evidence("v", /*xfail=*/false);
  e.expectation.diagnoses = std::vector<DiagnosisKind>{DiagnosisKind::kRetainedGrad};
  Diagnosis found;
  found.kind = DiagnosisKind::kRetainedGrad;
  e.measurement->diagnosed = true;
  e.measurement->diagnoses = {found};
  EXPECT_EQ(JudgeVariant(e).code, ResultCode::kPass);
  Diagnosis extra;
  extra.kind = DiagnosisKind::kLeak;
  extra.message = "live bytes grow by 4 bytes per iteration";
  e.measurement->diagnoses = {found, extra};
  VariantResult r = JudgeVariant(e);
  EXPECT_EQ(r.code, ResultCode::kFail);
  EXPECT_EQ(r.reasons, std::vector<std::string>{"unexpected diagnosis leak (expected [retained-grad]): live bytes grow "
                                                "by 4 bytes per iteration"});
  e.measurement->diagnoses = {};
  r = JudgeVariant(e);
  EXPECT_EQ(r.reasons, std::vector<std::string>{"expected diagnosis retained-grad was not found (found [])"});
  e.expectation.diagnoses = std::vector<DiagnosisKind>{};
  EXPECT_EQ(JudgeVariant(e).code, ResultCode::kPass);  // [] expects none, and none was found
  // Advice fails nothing unless named (as HasNoPitfalls() ignores it); named and missing, it fails.
  Diagnosis advice;
  advice.kind = DiagnosisKind::kActivationsDominate;
  e.measurement->diagnoses = {advice};
  EXPECT_EQ(JudgeVariant(e).code, ResultCode::kPass);
  e.measurement->diagnoses = {advice, extra};
  EXPECT_EQ(JudgeVariant(e).reasons,
            std::vector<std::string>{"unexpected diagnosis leak (expected []): live bytes grow by 4 bytes per iteration"});
  e.expectation.diagnoses = std::vector<DiagnosisKind>{DiagnosisKind::kActivationsDominate};
  e.measurement->diagnoses = {};
  EXPECT_EQ(JudgeVariant(e).reasons,
            std::vector<std::string>{"expected diagnosis activations-dominate was not found (found [])"});
  e.expectation.diagnoses = std::vector<DiagnosisKind>{};
  e.measurement->diagnosed = false;                    // the detectors did not watch: the expectation cannot hold
  EXPECT_EQ(JudgeVariant(e).code, ResultCode::kFail);
}

TEST(VerdictDeathTest, AScenarioIsJudgedOnce) {
  Scenario scenario;
  ScenarioResult header;
  header.name = "s";
  ScenarioEvidence evidence;
  evidence.variants = {Evidence("a", false)};
  const ScenarioResult judged = JudgeScenario(scenario, header, evidence);
  EXPECT_DEATH((void)JudgeScenario(scenario, judged, evidence),
               "scenario 's' was judged already \\(or did not run\\): a result's code is decided once");
}

// --- Who writes a result code: the plan (scenarios that do not run) and the verdict, nobody else.

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      if (std::string name = e->d_name; name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  return names;
}

void CodeWritesUnder(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  static const std::regex write(R"((\.|->)code\s*=[^=])");
  for (const std::string& name : Entries(root + "/" + rel)) {
    const std::string path = rel.empty() ? name : rel + "/" + name;
    struct stat st {};
    if (stat((root + "/" + path).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (!name.starts_with(".") && name != "tests" && name != "build" && name != "bench") {
        CodeWritesUnder(root, path, out);
      }
      continue;
    }
    if (!name.ends_with(".cpp") && !name.ends_with(".h")) continue;
    std::ifstream in(root + "/" + path);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (std::regex_search(line, write)) out->push_back(path + ":" + std::to_string(n));
    }
  }
}

TEST(ResultCodes, AreWrittenOnlyByThePlanAndTheVerdict) {
  std::vector<std::string> writes;
  CodeWritesUnder(OOMGUARD_SOURCE_DIR, "", &writes);
  std::vector<std::string> elsewhere;
  for (const std::string& w : writes) {
    if (!w.starts_with("run/plan.cpp:") && !w.starts_with("verdict/verdict.cpp:")) elsewhere.push_back(w);
  }
  EXPECT_EQ(elsewhere, std::vector<std::string>{});
  // NotRun in the plan; a variant's and a scenario's in the verdict, and the two outcomes it records
  // for the pytest plugin (RecordOutcome, RecordScenarioOutcome).
  EXPECT_EQ(writes.size(), 5u);
}

}  // namespace
}  // namespace oomguard
