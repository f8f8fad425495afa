// One rank of a data-parallel or ZeRO step (Note [One simulated rank], workload/parallel/data_parallel.h): a
// rank's parameter, gradient and Adam-state bytes are the ZeRO paper's arithmetic for float32 Adam
// (4 + 4 + 8 bytes per parameter, divided as each stage divides them), on cpu and on meta to the byte,
// with DeepSpeed's padding; DDP's buckets hold exactly the gradients' bytes, and without
// gradient_as_bucket_view every gradient has a copy in them.
#include <gtest/gtest.h>

#include "model/measurement_json.h"
#include "tests/parallel_mlp.h"
#include "tests/same_bytes.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

// linear 64 -> 128, relu, linear 128 -> 64 (+ linear 64 -> 3 with `odd`): N = 8320 + 8256 = 16576
// parameters, a multiple of 2 x 4 (no padding at world 2 or 4); with odd, N = 16771.
constexpr int64_t kN = 64 * 128 + 128 + 128 * 64 + 64;
constexpr int64_t kOddN = kN + 64 * 3 + 3;

VariantSpec Mlp(const std::string& strategy, int64_t world, int64_t rank = 0, bool odd = false, bool bf16 = false) {
  return testing::ParallelMlp(strategy, world, rank, odd, bf16);
}

VariantMeasurement Measure(const VariantSpec& spec, Backend backend) { return testing::MeasurePassing(spec, backend); }

struct RankBytes {
  int64_t params, grads, state;
};

RankBytes Bytes(const VariantMeasurement& m) { return {m.param_bytes, *m.grad_bytes, *m.optimizer_state_bytes}; }

// Stage by stage, at world 2 and 4, rank 0: params 4N; Adam's two moments 8N (ddp) or 8N / world
// (zero1, zero2); grads 4N (ddp), or, between backward and the step, the whole gradients of the
// parameters rank 0's partition [0, S) crosses (Note [Gradients between backward and step],
// workload/parallel/data_parallel.h; stage_1_and_2.py's get_partition_info, 1617-1634, and
// copy_grads_in_partition, 1344-1360), in both stages: at world 2, S = 8288 ends inside bias 1
// ([8192, 8320)): weight 1 and bias 1, 8320 elements; at world 4, S = 4144 lies inside weight 1: 8192.
TEST(ParallelStrategies, EachRankHoldsTheZeroPapersBytesOnCpuAndMeta) {
  for (const int64_t world : {2, 4}) {
    for (const std::string strategy : {"ddp", "zero1", "zero2"}) {
      SCOPED_TRACE(strategy + " at world " + std::to_string(world));
      const int64_t grads = strategy == "ddp" ? 4 * kN : 4 * (world == 2 ? 64 * 128 + 128 : 64 * 128);
      const int64_t state = strategy == "ddp" ? 8 * kN : 8 * kN / world;
      for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
        const VariantMeasurement m = Measure(Mlp(strategy, world), backend);
        const RankBytes b = Bytes(m);
        EXPECT_EQ(b.params, 4 * kN);
        EXPECT_EQ(b.grads, grads);
        EXPECT_EQ(b.state, state);
        ASSERT_TRUE(m.parallel.has_value());
        EXPECT_EQ(m.parallel->world, world);
        EXPECT_EQ(m.parallel->strategy, strategy);
      }
    }
  }
  // world 4: zero1 = zero2 = 4N + 4 x 8192 + 2N = 132224 bytes (the paper's zero2, 4N + N + 2N = 116032,
  // would be S = 4144 gradients); ddp = 16N = 265216.
  EXPECT_EQ(4 * kN + 4 * 8192 + 8 * kN / 4, 132224);
}

// N = 16771 at world 4: the flat buffer is padded to 16776 (a multiple of 2 x 4), S = 4194 elements a
// rank. Every rank holds the padded parameters; Adam's state covers the parameters of its slice: 4194
// elements on ranks 0-2, 16771 - 3 x 4194 = 4189 on rank 3. Its gradients are the whole ones of the
// parameters its slice crosses, and zeros for its padding: rank 0's [0, 4194) lies in weight 1 (8192);
// rank 3's [12582, 16776) starts in weight 2 ([8320, 16512)) and holds bias 2, weight 3 and bias 3:
// 8192 + 64 + 192 + 3 = 8451, and 16776 - 16771 = 5 of padding.
TEST(ParallelStrategies, PaddingFollowsDeepSpeedAndTheLastRankStepsWhatIsLeft) {
  for (const int64_t rank : {0, 3}) {
    const int64_t owned = rank == 3 ? kOddN - 3 * 4194 : 4194;
    const int64_t grads = rank == 3 ? 8451 + 5 : 8192;
    const VariantMeasurement cpu = Measure(Mlp("zero2", 4, rank, /*odd=*/true), Backend::kCpu);
    const VariantMeasurement meta = Measure(Mlp("zero2", 4, rank, /*odd=*/true), Backend::kMeta);
    for (const VariantMeasurement* m : {&cpu, &meta}) {
      EXPECT_EQ(m->param_bytes, 4 * 16776);
      EXPECT_EQ(*m->grad_bytes, 4 * grads);
      EXPECT_EQ(*m->optimizer_state_bytes, 8 * owned);
      EXPECT_EQ(m->parallel->rank, rank);
    }
  }
}

// cpu and meta with FakeProcessGroup: the same allocations, the same peaks, phase by phase.
TEST(ParallelStrategies, CpuEqualsMetaToTheByte) {
  for (const std::string strategy : {"ddp", "zero1", "zero2"}) {
    SCOPED_TRACE(strategy);
    const VariantMeasurement cpu = Measure(Mlp(strategy, 4, 1), Backend::kCpu);
    const VariantMeasurement meta = Measure(Mlp(strategy, 4, 1), Backend::kMeta);
    testing::ExpectSameBytes(cpu, meta);
    EXPECT_EQ(cpu.parallel, meta.parallel);
  }
}

// The parameters in reverse order, a bucket closed at >= its limit. bucket_cap_mb 0.03: 31457 bytes:
// [b2 256 + W2 32768] = 33024, [b1 512 + W1 32768] = 33280. The default 25 MiB, whose first bucket is
// capped at 1 MiB: one bucket of all 4N = 66304 bytes.
TEST(ParallelStrategies, DdpBucketsHoldEveryGradientOnce) {
  VariantSpec small = Mlp("ddp", 2);
  small.parallel.bucket_cap_mb = 0.03;
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    const VariantMeasurement m = Measure(small, backend);
    EXPECT_EQ(m.parallel->bucket_bytes, (std::vector<int64_t>{33024, 33280}));
    EXPECT_EQ(m.parallel->communication_bytes, 4 * kN);
    const VariantMeasurement d = Measure(Mlp("ddp", 2), backend);
    EXPECT_EQ(d.parallel->bucket_bytes, (std::vector<int64_t>{4 * kN}));
  }
}

// DDP's pitfall: without gradient_as_bucket_view each gradient and its bucket copy are live after
// backward; with it the gradients are the buckets' views. The difference is every gradient: 4N bytes.
TEST(ParallelStrategies, GradientAsBucketViewSavesOneCopyOfTheGradients) {
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    VariantSpec view = Mlp("ddp", 2);
    view.parallel.gradient_as_bucket_view = true;
    const VariantMeasurement copied = Measure(Mlp("ddp", 2), backend);
    const VariantMeasurement viewed = Measure(view, backend);
    EXPECT_EQ(copied.iterations[1].live_after_backward_bytes - viewed.iterations[1].live_after_backward_bytes, 4 * kN);
    EXPECT_EQ(*viewed.grad_bytes, 4 * kN);  // the views, counted once: the buckets hold them
    // zero_grad filling the views with zeros keeps them views (LibTorch's Optimizer::zero_grad would
    // detach_() them, which a view refuses): after the first step nothing is allocated for gradients.
    view.loop.zero_grad = "zero";
    const VariantMeasurement zeroed = Measure(view, backend);
    EXPECT_EQ(zeroed.iterations[1].live_after_backward_bytes, viewed.iterations[1].live_after_backward_bytes);
  }
}

// An OOM's breakdown names a rank's buffers for collectives: ddp's buckets (none apart from the
// gradients with gradient_as_bucket_view: they are the views); the categories still sum to what was
// live. The cap is one byte under each run's own peak: ddp's in Adam's step; zero2's is the staging
// buffer of its one bucket (4N), asked for when the first gradient (the last bias, 256 bytes) is in.
TEST(ParallelStrategies, AnOomBreakdownCountsCommunicationBuffers) {
  VariantSpec view = Mlp("ddp", 2);
  view.parallel.gradient_as_bucket_view = true;
  struct Case {
    VariantSpec spec;
    int64_t communication, gradients;
    std::string phase;
    int64_t requested = 0;  // 0: not checked
  };
  for (const Case& c : {Case{Mlp("ddp", 2), 4 * kN, 4 * kN, "optimizer"}, Case{view, 0, 4 * kN, "optimizer"},
                        Case{Mlp("zero2", 2), 0, 256, "backward", 4 * kN}}) {
    SCOPED_TRACE(c.spec.parallel.strategy);
    for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
      VariantMeasureOptions options{.backend = backend};
      options.limits.cap_bytes = Measure(c.spec, backend).ledger.peak_bytes - 1;
      const VariantMeasurement m = MeasureVariant(c.spec, options);
      ASSERT_EQ(Name(m.outcome), "oom") << m.error;
      const OomDetail& o = *m.oom;
      EXPECT_EQ(o.phase, c.phase);
      if (c.requested > 0) {
        EXPECT_EQ(o.requested_bytes, c.requested);
      }
      EXPECT_EQ(o.live.communication_bytes, c.communication);
      EXPECT_EQ(o.live.gradients_bytes, c.gradients);
      EXPECT_EQ(o.live.parameters_bytes + o.live.gradients_bytes + o.live.optimizer_state_bytes + o.live.inputs_bytes +
                    o.live.activations_and_transient_bytes + o.live.communication_bytes,
                o.live_bytes);
      const nlohmann::json j = MeasurementToJson(m);
      EXPECT_EQ(j.at("oom").at("live").value("communication_bytes", int64_t{0}), c.communication);
      VariantMeasurement back;
      std::string error;
      ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
      EXPECT_EQ(back.oom->live.communication_bytes, c.communication);
    }
  }
}

TEST(ParallelStrategies, TheMeasurementSaysWhichRankItIs) {
  const VariantMeasurement m = Measure(Mlp("zero1", 4, 2), Backend::kMeta);
  const nlohmann::json j = MeasurementToJson(m);
  EXPECT_EQ(j.at("parallel"), nlohmann::json::parse(
                                  R"({"world": 4, "rank": 2, "strategy": "zero1", "communication_bytes": 0,
                                      "bucket_bytes": []})"));
  VariantMeasurement back;
  std::string error;
  ASSERT_TRUE(MeasurementFromJson(j, &back, &error)) << error;
  EXPECT_EQ(back.parallel, m.parallel);
  EXPECT_FALSE(MeasurementToJson(Measure(Mlp("ddp", 1), Backend::kMeta)).contains("parallel"));
}

}  // namespace
}  // namespace oomguard
