// The verdict on reserved bytes (Note [The verdict on reserved bytes], run/run_options.h): a cpu run
// whose tensors fit a cap while the CUDA caching allocator's segments do not ends in an OOM, as on a
// GPU; expandable segments make it fit; `fit` finds the boundary on reserved bytes.
//
// Note [Five 700 KiB tensors] (the bytes, by hand, from the rules in caching_allocator_model.h)
// Each tensor is 700 KiB = 716800 bytes (a multiple of 512: no rounding), <= 1 MiB: the small pool,
// whose segments are 2 MiB (2097152). A segment holds two (1433600 bytes), and the 663552 left is too
// small for a third, so tensors 1-2 take segment 1, 3-4 segment 2, 5-6 segment 3, ...:
//   count tensors: reserved ceil(count / 2) * 2 MiB, allocated count * 716800.
// Five under a 5 MiB cap (5242880): the ledger admits 3584000 bytes, but the fifth needs a third
// segment, 4 MiB + 2 MiB > 5 MiB, and releasing the cache frees nothing (both segments are in use):
// an OOM at the fifth, with reserved 4 MiB and allocated 4 * 716800 = 2867200 bytes (2.73 MiB).
// With expandable segments the small pool is one segment mapped in 2 MiB pages, and each block goes
// where the last left off: five take 3584000 bytes of two pages, reserved 4 MiB, which fits. A sixth
// (4300800 bytes) needs a third page: 4 + 2 > 5 MiB.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "fit/fit_search.h"
#include "fit/fit_trial.h"
#include "oomguard/workload.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kTensorBytes = 700 * 1024;

void KeepsTensors(Context& ctx) {
  const int64_t count = ctx.Int("count");
  for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) {
    std::vector<torch::Tensor> kept;
    for (int64_t i = 0; i < count; ++i) kept.push_back(torch::empty({kTensorBytes}, ctx.options().dtype(torch::kUInt8)));
  }
}

VariantSpec Tensors(int64_t count) {
  VariantSpec spec;
  spec.name = "v";
  spec.workload = "keeps-tensors";  // fit varies a workload's knob (WithKnob)
  spec.knobs["count"] = count;
  spec.loop.iterations = 1;
  return spec;
}

VariantMeasurement Measure(int64_t count, int64_t cap_bytes, ModelCuda model_cuda, const std::string& alloc_conf = "") {
  VariantMeasureOptions options;
  options.limits = LimitsForCap(cap_bytes);
  options.model_cuda = model_cuda;
  std::string error;
  options.alloc_conf = *ParseCachingAllocatorConfig(alloc_conf, &error);
  options.diagnose = false;
  return MeasureWorkload(KeepsTensors, Tensors(count), options);
}

TEST(ReservedVerdict, TensorsThatFitTheCapWhileTheirSegmentsDoNotAreAnOom) {
  const VariantMeasurement m = Measure(5, 5 * kMiB, ModelCuda::kVerdict);
  ASSERT_EQ(Name(m.outcome), "oom") << m.error;
  EXPECT_NE(m.error.find("CPU out of memory (oomguard cap on reserved bytes, as on the GPU). Tried to allocate "
                         "700.00 KiB. PyTorch's caching allocator: reserved 4.00 MiB (allocated 2.73 MiB) + a 2.00 MiB "
                         "segment would pass the cap 5.00 MiB (5242880 bytes), even after releasing its cache. "
                         "2.73 MiB is live in tensors."),
            std::string::npos)
      << m.error;
  ASSERT_TRUE(m.oom.has_value());
  EXPECT_EQ(m.oom->requested_bytes, kTensorBytes);
  EXPECT_EQ(m.oom->live_bytes, 4 * kTensorBytes);
  EXPECT_EQ(m.ledger.peak_bytes, 4 * kTensorBytes);  // the refused fifth raised no peak
  ASSERT_TRUE(m.cuda_model.has_value());
  EXPECT_TRUE(m.cuda_model->decides);
  EXPECT_EQ(m.cuda_model->reserved_peak_bytes, 4 * kMiB);
  EXPECT_EQ(m.cuda_model->allocated_peak_bytes, 4 * kTensorBytes);
  EXPECT_EQ(m.cuda_model->alloc_retries, 1);
  EXPECT_EQ(m.cuda_model->ooms, 1);
}

TEST(ReservedVerdict, TheAllocatedVerdictPassesAsBefore) {
  const VariantMeasurement m = Measure(5, 5 * kMiB, ModelCuda::kPredict);
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  EXPECT_EQ(m.ledger.peak_bytes, 5 * kTensorBytes);  // 3584000 <= 5242880
  ASSERT_TRUE(m.cuda_model.has_value());
  EXPECT_FALSE(m.cuda_model->decides);
  EXPECT_EQ(m.cuda_model->ooms, 1);  // predicted: the fifth, never a third segment
  EXPECT_FALSE(Measure(5, 5 * kMiB, ModelCuda::kOff).cuda_model.has_value());
}

TEST(ReservedVerdict, ExpandableSegmentsMakeItFit) {
  const VariantMeasurement m = Measure(5, 5 * kMiB, ModelCuda::kVerdict, "expandable_segments:True");
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  ASSERT_TRUE(m.cuda_model.has_value());
  EXPECT_EQ(m.cuda_model->reserved_peak_bytes, 4 * kMiB);
  EXPECT_EQ(m.cuda_model->allocated_peak_bytes, 5 * kTensorBytes);
  EXPECT_EQ(m.cuda_model->ooms, 0);
  EXPECT_EQ(Name(Measure(6, 5 * kMiB, ModelCuda::kVerdict, "expandable_segments:True").outcome), "oom");
}

TEST(ReservedVerdict, UnmodelledKeysAreAWarning) {
  const VariantMeasurement m = Measure(1, 5 * kMiB, ModelCuda::kVerdict, "pinned_use_cuda_host_register:True");
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_EQ(m.warnings[0],
            "the allocator config sets pinned_use_cuda_host_register, which the model of the CUDA caching allocator "
            "ignores: its reserved bytes leave them out");
}

// Note [Reserved peaks across caps], fit/fit_search.h: at 6 MiB six tensors fit (three segments) and
// seven do not (four, though their 5017600 bytes are under the cap); at 5 MiB four fit (two segments).
TEST(ReservedVerdict, FitFindsTheBoundaryOnReservedBytes) {
  const MeasureFunction measure = [](const VariantSpec& spec, const VariantMeasureOptions& options) {
    return MeasureWorkload(KeepsTensors, spec, options);
  };
  const auto fit = [&](ModelCuda model_cuda) {
    FitSearch search(1, 64, MakeFitTrial(Tensors(1), "count", Backend::kCpu, 0, 300, measure, model_cuda));
    return FitTargets(search, {{"", 6 * kMiB}, {"", 5 * kMiB}});
  };
  const std::vector<CardFit> reserved = fit(ModelCuda::kVerdict);
  EXPECT_EQ(reserved[0].max_value, 6);
  EXPECT_EQ(reserved[0].peak_bytes_at_max, 6 * kMiB);  // the reserved peak
  EXPECT_EQ(reserved[1].max_value, 4);
  EXPECT_EQ(reserved[1].peak_bytes_at_max, 4 * kMiB);
  const std::vector<CardFit> allocated = fit(ModelCuda::kOff);
  EXPECT_EQ(allocated[0].max_value, 8);  // 8 * 716800 = 5734400 <= 6 MiB
  EXPECT_EQ(allocated[1].max_value, 7);  // 7 * 716800 = 5017600 <= 5 MiB
  EXPECT_EQ(allocated[1].peak_bytes_at_max, 7 * kTensorBytes);
}

}  // namespace
}  // namespace oomguard
