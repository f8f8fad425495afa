// oomguard::Measure (run/in_process_measure.cpp) judges as `oomguard run` does: under a card or a cap
// on the reserved bytes of the model of the CUDA caching allocator (Note [The in-process verdict],
// oomguard/measure.h), with verdict "allocated" and alloc_conf as --verdict and --alloc-conf.
//
// The bytes, by hand (Note [Five 700 KiB tensors], reserved_verdict_test.cpp): each tensor is 716800
// bytes (a multiple of 512), <= 1 MiB, so it takes a block of a 2 MiB small-pool segment, which holds
// two. Five: allocated 3584000, reserved 3 segments (6 MiB). Under a 5 MiB cap the fifth needs a third
// segment, 4 + 2 > 5 MiB: an OOM with four live (2867200 bytes, 2.73 MiB) though the five's 3584000
// fit; the allocated verdict passes. With expandable segments the small pool is one segment mapped in
// 2 MiB pages, and five take 3584000 bytes of two pages: reserved 4 MiB.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "oomguard/measure.h"
#include "oomguard/workload.h"
#include "tests/scoped_environment.h"

namespace oomguard {
namespace {

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kTensorBytes = 700 * 1024;  // 716800

void KeepsFive(Context& ctx) {
  for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) {
    std::vector<torch::Tensor> kept;
    for (int i = 0; i < 5; ++i) kept.push_back(torch::empty({kTensorBytes}, ctx.options().dtype(torch::kUInt8)));
  }
}

// The tests read the model's default settings: none from the environment.
class InProcessVerdict : public ::testing::Test {
 protected:
  testing::ScopedEnvironment env_{{"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"}};
};

MeasureOptions Options(const std::string& cap, const std::string& verdict = "", const std::string& alloc_conf = "") {
  MeasureOptions options;
  options.cap = cap;
  options.iterations = 1;
  options.verdict = verdict;
  options.alloc_conf = alloc_conf;
  return options;
}

TEST_F(InProcessVerdict, ReservedBytesPastTheCapAreAnOomThoughTheTensorsFit) {
  const Measurement m = Measure(KeepsFive, Options("5MiB"));
  ASSERT_EQ(m.outcome, "oom") << m.Describe();
  EXPECT_NE(m.error.find(
                "CPU out of memory (oomguard cap on reserved bytes, as on the GPU). Tried to allocate 700.00 KiB. "
                "PyTorch's caching allocator: reserved 4.00 MiB (allocated 2.73 MiB) + a 2.00 MiB segment would pass "
                "the cap 5.00 MiB (5242880 bytes), even after releasing its cache. 2.73 MiB is live in tensors."),
            std::string::npos)
      << m.error;
  ASSERT_TRUE(m.cuda_model.has_value());
  EXPECT_TRUE(m.cuda_model->decides);
  EXPECT_EQ(m.cuda_model->allocated_peak_bytes, 4 * kTensorBytes);
  EXPECT_EQ(m.cuda_model->reserved_peak_bytes, 4 * kMiB);
  EXPECT_EQ(m.cuda_model->fragmentation_bytes(), 4 * kMiB - 4 * kTensorBytes);  // 1327104
  EXPECT_EQ(m.cuda_model->alloc_retries, 1);
  EXPECT_EQ(m.cuda_model->ooms, 1);
  EXPECT_EQ(m.cuda_model->allocated_at_start_bytes, 0);
  EXPECT_EQ(m.cuda_model->reserved_at_start_bytes, 0);
  // The refused fifth raised no peak: 2867200 bytes live, as the model's allocated bytes.
  EXPECT_EQ(m.peak_bytes, 4 * kTensorBytes);
  const std::string text = m.Describe();
  EXPECT_NE(text.find("\n  peak 2.73 MiB (2867200 bytes) in step\n  cuda model: allocated 2.73 MiB, reserved 4.00 MiB "
                      "(fragmentation 1.27 MiB), 1 retry, 1 OOM; the verdict is on reserved bytes\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  out of memory in step: 700.00 KiB (716800 bytes) requested with 2.73 MiB (2867200 bytes) "
                      "live: "),
            std::string::npos)
      << text;
}

TEST_F(InProcessVerdict, TheAllocatedVerdictJudgesTheTensorsAloneAndRunsNoModel) {
  const Measurement m = Measure(KeepsFive, Options("5MiB", "allocated"));
  ASSERT_EQ(m.outcome, "pass") << m.Describe();
  EXPECT_EQ(m.peak_bytes, 5 * kTensorBytes);  // 3584000 <= 5242880
  EXPECT_FALSE(m.cuda_model.has_value());
  EXPECT_EQ(m.Describe().find("cuda model"), std::string::npos);
}

TEST_F(InProcessVerdict, ExpandableSegmentsTakeTwoPagesWhereSegmentsTakeThree) {
  const Measurement segments = Measure(KeepsFive, Options("8MiB"));
  ASSERT_EQ(segments.outcome, "pass") << segments.Describe();
  ASSERT_TRUE(segments.cuda_model.has_value());
  EXPECT_EQ(segments.cuda_model->allocated_peak_bytes, 5 * kTensorBytes);
  EXPECT_EQ(segments.cuda_model->reserved_peak_bytes, 6 * kMiB);
  const Measurement pages = Measure(KeepsFive, Options("8MiB", "", "expandable_segments:True"));
  ASSERT_EQ(pages.outcome, "pass") << pages.Describe();
  ASSERT_TRUE(pages.cuda_model.has_value());
  EXPECT_EQ(pages.cuda_model->allocated_peak_bytes, 5 * kTensorBytes);
  EXPECT_EQ(pages.cuda_model->reserved_peak_bytes, 4 * kMiB);
  // And they make the 5 MiB cap fit.
  EXPECT_EQ(Measure(KeepsFive, Options("5MiB", "reserved", "expandable_segments:True")).outcome, "pass");
}

TEST_F(InProcessVerdict, AnEmptyAllocConfReadsTheEnvironment) {
  env_.Set("PYTORCH_ALLOC_CONF", "expandable_segments:True");
  const Measurement m = Measure(KeepsFive, Options("8MiB"));
  ASSERT_TRUE(m.cuda_model.has_value());
  EXPECT_EQ(m.cuda_model->reserved_peak_bytes, 4 * kMiB);
  env_.Set("PYTORCH_ALLOC_CONF", "expandable_segments:yes");
  try {
    Measure(KeepsFive, Options("8MiB"));
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "oomguard::Measure: PYTORCH_ALLOC_CONF (from the environment): expandable_segments: expected True "
                 "or False, got 'yes'");
  }
}

TEST_F(InProcessVerdict, WithoutACapTheModelOnlyPredicts) {
  MeasureOptions options;
  options.iterations = 1;
  const Measurement m = Measure(KeepsFive, options);
  ASSERT_EQ(m.outcome, "pass") << m.Describe();
  ASSERT_TRUE(m.cuda_model.has_value());
  EXPECT_FALSE(m.cuda_model->decides);
  EXPECT_EQ(m.cuda_model->reserved_peak_bytes, 6 * kMiB);
  EXPECT_EQ(m.cuda_model->ooms, 0);
}

TEST_F(InProcessVerdict, BadVerdictsAndAllocConfsAreInvalidArguments) {
  const auto error_of = [](const MeasureOptions& options) -> std::string {
    try {
      Measure(KeepsFive, options);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  EXPECT_EQ(error_of(Options("5MiB", "bytes")), "oomguard::Measure: verdict 'bytes' is not one of reserved, allocated");
  EXPECT_EQ(error_of(Options("5MiB", "", "expandable_segments:true")),
            "oomguard::Measure: alloc_conf: expandable_segments: expected True or False, got 'true'");
}

// A card's cuBLAS workspaces are held from the start (Note [cuBLAS workspaces held from the start],
// backends/meta/cublas_workspace.cpp): on a T4 (sm_75) cuBLAS's 8 MiB + 128 KiB (8519680 bytes), a
// large block of a 20 MiB segment, and cuBLASLt's 1 MiB (1048576), a small block of a 2 MiB segment.
// The matmul's three 16 KiB tensors fit the small segment's free MiB: reserved stays 22 MiB. On cpu's
// kernels nothing is held.
void Matmul(Context& ctx) {
  const torch::Tensor a = torch::ones({64, 64}, ctx.options()), b = torch::ones({64, 64}, ctx.options());
  const torch::Tensor c = torch::mm(a, b);
}

TEST_F(InProcessVerdict, AtStartTheModelHoldsACardsWorkspacesOnItsKernelsOnly) {
  MeasureOptions options;
  options.card = "t4";
  options.iterations = 1;
  const Measurement cpu = Measure(Matmul, options);
  ASSERT_EQ(cpu.outcome, "pass") << cpu.Describe();
  ASSERT_TRUE(cpu.cuda_model.has_value());
  EXPECT_EQ(cpu.cuda_model->allocated_at_start_bytes, 0);
  EXPECT_EQ(cpu.cuda_model->reserved_at_start_bytes, 0);
  EXPECT_EQ(cpu.cuda_model->reserved_peak_bytes, 2 * kMiB);

  options.backend = "meta";
  options.kernels = "cuda";
  const Measurement t4 = Measure(Matmul, options);
  ASSERT_EQ(t4.outcome, "pass") << t4.Describe();
  EXPECT_EQ(t4.kernels, "cuda sm_75");
  EXPECT_EQ(t4.peak_bytes, 3 * 64 * 64 * 4);  // the workspaces are outside the ledger
  ASSERT_TRUE(t4.cuda_model.has_value());
  EXPECT_EQ(t4.cuda_model->allocated_at_start_bytes, 8519680 + 1048576);
  EXPECT_EQ(t4.cuda_model->reserved_at_start_bytes, 20 * kMiB + 2 * kMiB);
  EXPECT_EQ(t4.cuda_model->allocated_peak_bytes, 8519680 + 1048576 + 3 * 64 * 64 * 4);
  EXPECT_EQ(t4.cuda_model->reserved_peak_bytes, 22 * kMiB);
  EXPECT_NE(t4.Describe().find("; reserved includes 22.00 MiB held from the start (cuBLAS workspaces, outside the "
                               "ledger)\n"),
            std::string::npos)
      << t4.Describe();
}

}  // namespace
}  // namespace oomguard
