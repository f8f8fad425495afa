// The closed sets of model/ (outcomes, error categories, phases, dtypes): every value's Name() parses
// back to it, nothing else parses, and the spellings are the ones scenario files and results JSON use.
#include <gtest/gtest.h>

#include "allocators/ledger.h"
#include "model/dtype.h"
#include "model/measurement_json.h"
#include "model/metric_names.h"
#include "model/outcome.h"
#include "model/phase.h"
#include "tests/report_fixture.h"

namespace oomguard {
namespace {

template <typename E>
void ExpectRoundTrips() {
  for (E value : AllValues<E>()) {
    E back{};
    ASSERT_TRUE(Parse(Name(value), &back)) << Name(value);
    EXPECT_EQ(back, value) << Name(value);
  }
  E untouched = AllValues<E>().back();
  EXPECT_FALSE(Parse("", &untouched));
  EXPECT_FALSE(Parse("no-such-name", &untouched));
  EXPECT_FALSE(Parse(std::string(Name(AllValues<E>().front())) + " ", &untouched));  // exact, no trimming
  EXPECT_EQ(untouched, AllValues<E>().back());
}

TEST(EnumNames, EveryValueRoundTrips) {
  ExpectRoundTrips<Outcome>();
  ExpectRoundTrips<ErrorCategory>();
  ExpectRoundTrips<Phase>();
  ExpectRoundTrips<DType>();
}

TEST(EnumNames, SpellingsAreTheFileFormats) {
  EXPECT_EQ(AllNames<ErrorCategory>(),
            (std::vector<std::string>{"inplace-saved-tensor", "inplace-leaf", "meta-kernel-missing", "error"}));
  EXPECT_EQ(AllNames<Phase>(), (std::vector<std::string>{"setup", "transfer", "forward", "backward", "optimizer",
                                                         "zero_grad", "eval", "step"}));
  EXPECT_EQ(kMetricPhases, AllNames<Phase>());
  EXPECT_EQ(AllNames<DType>(), (std::vector<std::string>{"float32", "bfloat16", "float16", "int64", "bool"}));
  EXPECT_EQ(AllNames(kModelDTypes), (std::vector<std::string>{"float32", "bfloat16", "float16"}));
  // The ledger (floor 1) starts in the workload's first phase (Note [Phases as names in the ledger]).
  EXPECT_EQ(Name(Phase::kSetup), Ledger::kInitialPhase);
}

TEST(EnumNames, DTypeSizesAreExact) {
  EXPECT_EQ(BytesPerElement(DType::kFloat32), 4);
  EXPECT_EQ(BytesPerElement(DType::kBFloat16), 2);
  EXPECT_EQ(BytesPerElement(DType::kFloat16), 2);
  EXPECT_EQ(BytesPerElement(DType::kInt64), 8);
  EXPECT_EQ(BytesPerElement(DType::kBool), 1);
}

TEST(VariantOutcome, NamesAndParsesEveryOutcome) {
  EXPECT_EQ(AllOutcomeNames(),
            (std::vector<std::string>{"pass", "oom", "error:inplace-saved-tensor", "error:inplace-leaf",
                                      "error:meta-kernel-missing", "error:error"}));
  for (const VariantOutcome& outcome : AllOutcomes()) {
    VariantOutcome back = VariantOutcome::Oom();
    ASSERT_TRUE(Parse(Name(outcome), &back)) << Name(outcome);
    EXPECT_EQ(back, outcome) << Name(outcome);
  }
  VariantOutcome untouched = VariantOutcome::Oom();
  for (const char* text : {"error", "error:", "error:oom", "Pass", "pass:", "oom:error", "error:error:"}) {
    EXPECT_FALSE(Parse(text, &untouched)) << text;
  }
  EXPECT_EQ(untouched, VariantOutcome::Oom());
  EXPECT_EQ(VariantOutcome(), VariantOutcome::Pass());
  EXPECT_NE(VariantOutcome::Error(ErrorCategory::kError), VariantOutcome::Error(ErrorCategory::kInplaceLeaf));
}

TEST(VariantOutcome, MeasurementJsonSpellsItAsBefore) {
  VariantMeasurement m = testing::SampleMeasurement("pitfall", 1);
  m.outcome = VariantOutcome::Error(ErrorCategory::kInplaceSavedTensor);
  nlohmann::json j = MeasurementToJson(m);
  EXPECT_EQ(j.at("outcome"), "error:inplace-saved-tensor");
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  EXPECT_EQ(back.outcome, m.outcome);

  j["outcome"] = "error:segfault";
  EXPECT_FALSE(MeasurementFromJson(j, &back, &error));
  EXPECT_EQ(error, "malformed measurement: unknown outcome 'error:segfault'");
}

}  // namespace
}  // namespace oomguard
