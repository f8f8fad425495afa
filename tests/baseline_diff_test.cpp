// Baselines compared: the comparison's verdicts under a tolerance, and what of a comparison fails a variant.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "baselines/baseline_diff.h"
#include "baselines/baseline_store.h"
#include "tests/baseline_measurement.h"

namespace oomguard {
namespace {

using testing::Measured;

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

// Note [Kernels of a meta run]: a meta run that mirrored a card's CUDA kernels is keyed apart from one
// that mirrored cpu's, so neither is compared with the other; cpu's entries keep no field, as files
// written before it have none.
TEST(BaselineDiff, CudaKernelRunsAreKeyedApartFromCpuKernelRuns) {
  VariantMeasurement cpu_kernels = Measured("v", 1000);
  cpu_kernels.backend = "meta";
  VariantMeasurement cuda_kernels = Measured("v", 700);
  cuda_kernels.backend = "meta";
  cuda_kernels.kernels = "cuda sm_75";
  BaselineFile file;
  file.scenario = "s";
  file.Put(EntryFromMeasurement(cpu_kernels));
  EXPECT_EQ(CompareWithBaseline(file, "f", cuda_kernels).verdict, BaselineVerdict::kNew);
  file.Put(EntryFromMeasurement(cuda_kernels));
  ASSERT_EQ(file.entries.size(), 2u);
  EXPECT_EQ(CompareWithBaseline(file, "f", cuda_kernels).verdict, BaselineVerdict::kUnchanged);
  EXPECT_EQ(CompareWithBaseline(file, "f", cpu_kernels).verdict, BaselineVerdict::kUnchanged);
  const std::string text = SerializeBaselineFile(file);
  EXPECT_EQ(text.find("\"kernels\": \"cpu\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"kernels\": \"cuda sm_75\""), std::string::npos) << text;
  BaselineFile loaded;
  std::string error;
  ASSERT_TRUE(LoadBaselineText(text, "b.json", &loaded, &error)) << error;
  EXPECT_EQ(loaded.Find("v", "meta", 1000000)->peak_bytes, 1000);
  EXPECT_EQ(loaded.Find("v", "meta", 1000000, "cuda sm_75")->peak_bytes, 700);
  EXPECT_EQ(SerializeBaselineFile(loaded), text);
}

// A rank is keyed by its strategy, rank, world and precision (BaselineParallel): the same variant at
// another world has no entry yet, never a diff against the old world's numbers; one process keeps no
// field, as files written before it have none.
TEST(BaselineDiff, RanksAreKeyedByStrategyRankWorldAndPrecision) {
  VariantMeasurement eight = Measured("v", 1000);
  eight.parallel = ParallelMeasurement{.world = 8, .rank = 0, .strategy = "fsdp"};
  VariantMeasurement sixteen = eight;
  sixteen.parallel->world = 16;
  sixteen.ledger.peak_bytes = 600;
  VariantMeasurement mixed = eight;
  mixed.parallel->param_dtype = "bfloat16";
  mixed.parallel->reduce_dtype = "float32";
  mixed.parallel->master_weights = true;
  EXPECT_EQ(BaselineParallel(eight), "fsdp rank 0 of 8");
  EXPECT_EQ(BaselineParallel(mixed), "fsdp rank 0 of 8, param_dtype bfloat16, reduce_dtype float32, master weights");
  EXPECT_EQ(BaselineParallel(Measured("v", 1)), "");
  BaselineFile file;
  file.scenario = "s";
  file.Put(EntryFromMeasurement(eight));
  EXPECT_EQ(CompareWithBaseline(file, "f", sixteen).verdict, BaselineVerdict::kNew);
  EXPECT_EQ(CompareWithBaseline(file, "f", mixed).verdict, BaselineVerdict::kNew);
  EXPECT_EQ(CompareWithBaseline(file, "f", Measured("v", 1000)).verdict, BaselineVerdict::kNew);
  file.Put(EntryFromMeasurement(sixteen));
  ASSERT_EQ(file.entries.size(), 2u);
  EXPECT_EQ(CompareWithBaseline(file, "f", eight).verdict, BaselineVerdict::kUnchanged);
  EXPECT_EQ(CompareWithBaseline(file, "f", sixteen).verdict, BaselineVerdict::kUnchanged);
  const std::string text = SerializeBaselineFile(file);
  EXPECT_NE(text.find("\"parallel\": \"fsdp rank 0 of 16\""), std::string::npos) << text;
  BaselineFile loaded;
  std::string error;
  ASSERT_TRUE(LoadBaselineText(text, "b.json", &loaded, &error)) << error;
  EXPECT_EQ(loaded.Find("v", "cpu", 1000000, "", "fsdp rank 0 of 16")->peak_bytes, 600);
  EXPECT_EQ(SerializeBaselineFile(loaded), text);
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

}  // namespace
}  // namespace oomguard
