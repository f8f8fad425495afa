// Activation checkpointing under one rank of FSDP2 (Note [Checkpointing an FSDP2 unit],
// workload/parallel/fully_sharded.h) and under the ZeRO stages: cpu equals meta per rank to the byte; the
// rank's parameters, gradients and optimizer state are what they are without checkpointing, the
// forward keeps each segment's input; a checkpointed segment that holds a unit and more is refused by the loader.
#include <gtest/gtest.h>

#include "scenario/variant_rules.h"
#include "tests/parallel_mlp.h"
#include "tests/same_bytes.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

// The MLP of tests/parallel_mlp.h (with `odd`: 4 layers), one checkpointed segment a layer.
VariantSpec Checkpointed(const std::string& strategy, int64_t world, int64_t rank) {
  VariantSpec v = testing::ParallelMlp(strategy, world, rank, /*odd=*/true);
  v.pitfalls.checkpoint.segments = 4;
  return v;
}

// The decoder of tests/parallel_mlp.h, one checkpointed segment a layer.
VariantSpec Decoder(int64_t world, int64_t rank) {
  VariantSpec v = testing::ParallelDecoder(world, rank);
  v.pitfalls.checkpoint.segments = 5;
  return v;
}

VariantMeasurement Measure(const VariantSpec& spec, Backend backend) { return testing::MeasurePassing(spec, backend); }

TEST(ParallelFsdpCheckpoint, CpuEqualsMetaToTheBytePerRank) {
  for (const int64_t world : {2, 4}) {
    for (int64_t rank = 0; rank < world; ++rank) {
      for (const bool decoder : {false, true}) {
        SCOPED_TRACE("world " + std::to_string(world) + " rank " + std::to_string(rank) + (decoder ? " decoder" : ""));
        const VariantSpec v = decoder ? Decoder(world, rank) : Checkpointed("fsdp", world, rank);
        const VariantMeasurement cpu = Measure(v, Backend::kCpu), meta = Measure(v, Backend::kMeta);
        testing::ExpectSameBytes(cpu, meta);
        EXPECT_EQ(cpu.parallel, meta.parallel);
      }
    }
  }
}

// Checkpointing moves no shard: each stage's parameters, gradients and optimizer state are the
// uncheckpointed run's. The forward keeps each segment's input but the batch (8 x 128, 8 x 128, 8 x 64
// floats), the output (8 x 3) and the loss; without checkpointing, relu's output (which the second
// linear saves too), the second linear's output, the output and the loss: per layer, a small MLP
// saves nothing by checkpointing (a decoder block does: the llm scenarios' checks).
TEST(ParallelFsdpCheckpoint, EachStageKeepsItsShardsAndTheForwardKeepsEachSegmentsInput) {
  for (const std::string strategy : {"zero1", "zero2", "fsdp"}) {
    for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
      SCOPED_TRACE(strategy + (backend == Backend::kCpu ? " cpu" : " meta"));
      VariantSpec plain = Checkpointed(strategy, 4, 1);
      plain.pitfalls.checkpoint.segments = 0;
      const VariantMeasurement c = Measure(Checkpointed(strategy, 4, 1), backend), p = Measure(plain, backend);
      EXPECT_EQ(c.param_bytes, p.param_bytes);
      EXPECT_EQ(*c.grad_bytes, *p.grad_bytes);
      EXPECT_EQ(*c.optimizer_state_bytes, *p.optimizer_state_bytes);
      EXPECT_EQ(c.parallel, p.parallel);
      EXPECT_EQ(*c.forward_saved_bytes, 4 * 8 * (128 + 128 + 64 + 3) + 4);
      EXPECT_EQ(*p.forward_saved_bytes, 4 * 8 * (128 + 64 + 3) + 4);
    }
  }
  for (const std::string strategy : {"zero1", "zero2"}) {  // whole parameters: cpu equals meta as well
    SCOPED_TRACE(strategy);
    testing::ExpectSameBytes(Measure(Checkpointed(strategy, 2, 0), Backend::kCpu),
                             Measure(Checkpointed(strategy, 2, 0), Backend::kMeta));
  }
}

// The MLP without `odd` (linear 64 -> 128, relu, linear 128 -> 64), one segment a layer, rank 1 of 4:
// the step peaks in backward, in the first segment's recomputed backward, as its bias gradient (128
// floats) is allocated. Communication: the first unit's weight and bias, gathered by its pre-backward
// (the flat all-gather output is freed after the copy-out, and the recomputation gathers nothing:
// Note [Checkpointing an FSDP2 unit]), and the second unit's reduce-scatter input, kept until the next
// post-backward; gradients: the second unit's sharded ones. Activations and transients: the first
// unit's weight gradient, unsharded; the recomputed output (8 x 128) and its gradient; the model's
// output (8 x 64), the loss and its gradient, alive until the step.
TEST(ParallelFsdpCheckpoint, TheBackwardPeakIsTheRecomputedUnitsGradientBesideItsGatheredParameters) {
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    VariantSpec step = testing::ParallelMlp("fsdp", 4, 1);
    step.pitfalls.checkpoint.segments = 3;
    const VariantMeasurement m = testing::OneByteUnderThePeak(step, backend);
    ASSERT_TRUE(m.oom.has_value());
    EXPECT_EQ(m.oom->phase, "backward");
    EXPECT_EQ(m.oom->requested_bytes, 128 * 4);
    EXPECT_EQ(m.oom->live.communication_bytes, 4 * (128 * 64 + 128) + 4 * (128 * 64 + 64));
    EXPECT_EQ(m.oom->live.gradients_bytes, 4 * (128 * 64 + 64) / 4);
    EXPECT_EQ(m.oom->live.activations_and_transient_bytes, 4 * 128 * 64 + 2 * 4 * 8 * 128 + 4 * 8 * 64 + 4 + 4);
  }
}

// Segments not aligned with units: the loader names the field and the segment.
TEST(ParallelFsdpCheckpoint, ASegmentHoldingAUnitAndMoreIsRefused) {
  VariantSpec v = Checkpointed("fsdp", 4, 0);
  v.pitfalls.checkpoint.segments = 2;  // layers 0-1 and 2-3
  std::optional<SpecProblem> problem = FindSpecProblem(v);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->path.ToString(), "pitfalls.checkpoint.segments");
  EXPECT_EQ(problem->message,
            "with parallel.strategy fsdp a checkpointed segment that holds a unit holds nothing else "
            "(fully_shard(checkpoint_wrapper(block))): segment 0 holds layers 0-1 and layer 0 (linear) is a "
            "unit; 4 segments (one a layer) are aligned");
  v.parallel.unit = "model";  // the root is never resharded: any segments
  EXPECT_FALSE(FindSpecProblem(v).has_value());
  VariantSpec d = Decoder(4, 0);
  d.pitfalls.checkpoint.segments = 4;  // 0-1 holds the embedding and the first block
  problem = FindSpecProblem(d);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->message.find("segment 0 holds layers 0-1 and layer 1 (transformer_block) is a unit"),
            std::string::npos)
      << problem->message;
}

}  // namespace
}  // namespace oomguard
