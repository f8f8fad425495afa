// Measurements cross the process boundary as JSON (model/measurement_json.h): what the child writes,
// the parent reads back unchanged, cuda statistics included.
#include "model/measurement_json.h"

#include <gtest/gtest.h>

#include "tests/report_fixture.h"

namespace oomguard {
namespace {

TEST(MeasurementJson, CudaStatisticsAndOriginsRoundTrip) {
  VariantMeasurement m = testing::SampleMeasurement("pitfall", 1);
  m.backend = "cuda";
  m.cuda = CudaMeasurement{4096, 2097152, 4096, 4000, 1, 0, {}};
  m.cuda->phases = {{"forward", 2048, 2097152, 2048, 2000}, {"backward", 4096, 2097152, 4096, 4000}};
  m.cuda->allocated_at_start_bytes = 33554432;
  m.cuda->reserved_at_start_bytes = 33554432 + 2097152;
  m.cuda->timed_transfers = 3;
  m.cuda->transfer_ms = 0.25;
  const nlohmann::json j = MeasurementToJson(m);
  EXPECT_EQ(j.at("cuda").at("fragmentation_at_peak_bytes"), 2097152 - 4096);
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  ASSERT_TRUE(back.cuda.has_value());
  EXPECT_EQ(back.cuda->allocated_peak_bytes, 4096);
  EXPECT_EQ(back.cuda->reserved_peak_bytes, 2097152);
  EXPECT_EQ(back.cuda->requested_peak_bytes, 4000);
  EXPECT_EQ(back.cuda->alloc_retries, 1);
  EXPECT_EQ(back.cuda->allocated_at_start_bytes, 33554432);
  EXPECT_EQ(back.cuda->reserved_at_start_bytes, 33554432 + 2097152);
  EXPECT_EQ(back.cuda->timed_transfers, 3);
  EXPECT_EQ(back.cuda->transfer_ms, 0.25);
  ASSERT_EQ(back.cuda->phases.size(), 2u);
  EXPECT_EQ(back.cuda->phases[1].phase, "backward");
  EXPECT_EQ(back.cuda->phases[1].requested_bytes, 4000);
  ASSERT_EQ(back.ledger.peak_by_origin.size(), m.ledger.peak_by_origin.size());
  EXPECT_EQ(back.ledger.peak_by_origin[1].peak_bytes, m.ledger.peak_by_origin[1].peak_bytes);
  EXPECT_EQ(MeasurementToJson(back), j);
}

TEST(MeasurementJson, NoCudaObjectOffCuda) {
  const nlohmann::json j = MeasurementToJson(testing::SampleMeasurement("fixed", 1));
  EXPECT_FALSE(j.contains("cuda"));
  EXPECT_FALSE(j.contains("snapshot"));  // only with --snapshot-dir
  EXPECT_FALSE(j.contains("snapshot_error"));
}

TEST(MeasurementJson, CudaModelRoundTripsAndIsAbsentWithoutIt) {
  VariantMeasurement m = testing::SampleMeasurement("pitfall", 1);
  EXPECT_FALSE(MeasurementToJson(m).contains("cuda_model"));
  m.cuda_model = CudaModelMeasurement{1536, 2097152, 1001, 1, 0, 0};
  const nlohmann::json j = MeasurementToJson(m);
  EXPECT_EQ(j.at("cuda_model").at("reserved_peak_bytes"), 2097152);
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  ASSERT_TRUE(back.cuda_model.has_value());
  EXPECT_EQ(back.cuda_model->allocated_peak_bytes, 1536);
  EXPECT_EQ(back.cuda_model->requested_peak_bytes, 1001);
  EXPECT_EQ(back.cuda_model->segments_peak, 1);
  EXPECT_EQ(MeasurementToJson(back), j);
}

// Note [Kernels of a meta run]: whose kernels made the bytes; results written before the field read "cpu".
TEST(MeasurementJson, KernelsRoundTripAndOlderResultsReadCpu) {
  VariantMeasurement m = testing::SampleMeasurement("pitfall", 1);
  m.backend = "meta";
  m.kernels = "cuda sm_75";
  nlohmann::json j = MeasurementToJson(m);
  EXPECT_EQ(j.at("kernels"), "cuda sm_75");
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  EXPECT_EQ(back.kernels, "cuda sm_75");
  j.erase("kernels");
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  EXPECT_EQ(back.kernels, "cpu");
}

// The precision a rank ran at (ParallelMeasurement::param_dtype, reduce_dtype, master_weights): written
// where set, absent where the rank ran at its model's dtype; results written before the fields read none.
TEST(MeasurementJson, ARanksPrecisionRoundTripsAndOlderResultsReadNone) {
  VariantMeasurement m = testing::SampleMeasurement("mixed", 1);
  m.parallel = ParallelMeasurement{8, 7, "fsdp", 1024, {2048}, false, "bfloat16", "float32", false};
  nlohmann::json j = MeasurementToJson(m);
  EXPECT_EQ(j.at("parallel"), nlohmann::json::parse(R"({"world": 8, "rank": 7, "strategy": "fsdp",
    "communication_bytes": 1024, "bucket_bytes": [2048], "param_dtype": "bfloat16", "reduce_dtype": "float32"})"));
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  EXPECT_EQ(back.parallel, m.parallel);
  m.parallel = ParallelMeasurement{2, 0, "zero2", 0, {}, false, "", "", true};
  j = MeasurementToJson(m);
  EXPECT_EQ(j.at("parallel"), nlohmann::json::parse(R"({"world": 2, "rank": 0, "strategy": "zero2",
    "communication_bytes": 0, "bucket_bytes": [], "master_weights": true})"));
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  EXPECT_EQ(back.parallel, m.parallel);
  j["parallel"].erase("master_weights");  // as a file written before the fields were
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  EXPECT_EQ(back.parallel, (ParallelMeasurement{2, 0, "zero2", 0, {}, false, "", "", false}));
}

TEST(MeasurementJson, SnapshotPathAndErrorRoundTrip) {
  VariantMeasurement m = testing::SampleMeasurement("pitfall", 1);
  m.snapshot = "snaps/s.pitfall.cpu.pickle";
  m.snapshot_error = "cannot write snaps/x: Permission denied";
  const nlohmann::json j = MeasurementToJson(m);
  EXPECT_EQ(j.at("snapshot"), "snaps/s.pitfall.cpu.pickle");
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  EXPECT_EQ(back.snapshot, m.snapshot);
  EXPECT_EQ(back.snapshot_error, m.snapshot_error);
}

}  // namespace
}  // namespace oomguard
