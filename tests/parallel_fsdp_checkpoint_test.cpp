// Activation checkpointing under one rank of FSDP2 (Note [Checkpointing an FSDP2 unit],
// workload/fully_sharded.h) and under the ZeRO stages: cpu equals meta per rank to the byte; the
// rank's parameters, gradients and optimizer state are what they are without checkpointing, the
// forward keeps less; a checkpointed segment that holds a unit and more is refused by the loader.
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

// The small decoder of parallel_fsdp_test.cpp: embedding, two blocks (the units), norm, head; on meta
// init, one checkpointed segment a layer.
VariantSpec Decoder(int64_t world, int64_t rank) {
  VariantSpec v = testing::ParallelMlp("fsdp", world, rank);
  v.model.layers = {LayerSpec{.kind = "embedding", .dim = 32, .vocab = 50},
                    LayerSpec{.kind = "transformer_block", .dim = 32, .hidden = 64, .heads = 4, .causal = true},
                    LayerSpec{.kind = "transformer_block", .dim = 32, .hidden = 64, .heads = 4, .causal = true},
                    LayerSpec{.kind = "layer_norm", .dim = 32}, LayerSpec{.kind = "linear", .in = 32, .out = 10}};
  v.data.shape = {16};
  v.data.dtype = DType::kInt64;
  v.data.vocab = 50;
  v.data.classes = 10;
  v.loop.loss = "cross_entropy";
  v.loop.optimizer.kind = "adamw";
  v.parallel.unit = "transformer_block";
  v.parallel.init = "meta";
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
// unchekpointed run's, and the forward keeps less (each layer's input and output, not its insides).
TEST(ParallelFsdpCheckpoint, EachStageKeepsItsShardsAndSavesLessInForward) {
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
      ASSERT_TRUE(c.forward_saved_bytes.has_value() && p.forward_saved_bytes.has_value());
      EXPECT_LT(*c.forward_saved_bytes, *p.forward_saved_bytes);
    }
  }
  for (const std::string strategy : {"zero1", "zero2"}) {  // whole parameters: cpu equals meta as well
    SCOPED_TRACE(strategy);
    testing::ExpectSameBytes(Measure(Checkpointed(strategy, 2, 0), Backend::kCpu),
                             Measure(Checkpointed(strategy, 2, 0), Backend::kMeta));
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
