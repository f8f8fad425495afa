// One rank of FSDP2 (Note [One FSDP2 rank], workload/parallel/fully_sharded.h) beside the other stages: each
// rank's parameter, gradient and optimizer-state bytes are the ZeRO paper's division for its stage,
// computed here from the layers' shapes (FSDP2 pads each parameter's dim 0 to a multiple of the world);
// cpu equals meta to the byte; at the forward's peak and at the step's (in backward) the rank holds
// exactly the all-gather outputs, unsharded parameters and reduce-scatter input FSDP2 holds there, as
// communication_bytes; meta-device init holds only the shards at setup.
#include <gtest/gtest.h>

#include <optional>
#include <tuple>

#include "tests/parallel_mlp.h"
#include "tests/same_bytes.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

// linear 64 -> 128, relu, linear 128 -> 64 (+ linear 64 -> 3 with `odd`: its dim 0 of 3 rows does not
// divide by 2 or 4).
VariantSpec Mlp(const std::string& strategy, int64_t world, int64_t rank = 0, bool odd = false, bool bf16 = false) {
  return testing::ParallelMlp(strategy, world, rank, odd, bf16);
}

VariantMeasurement Measure(const VariantSpec& spec, Backend backend) { return testing::MeasurePassing(spec, backend); }

// A parameter's shape as [dim 0 rows, elements per row].
struct Shape {
  int64_t rows, rest;
};

std::vector<Shape> Shapes(bool odd) {
  std::vector<Shape> s = {{128, 64}, {128, 1}, {64, 128}, {64, 1}};
  if (odd) s.insert(s.end(), {{3, 64}, {3, 1}});
  return s;
}

struct Elements {
  int64_t all = 0;                // N
  int64_t padded = 0;             // zero1/zero2: the flat buffer, padded to a multiple of 2 x world (DeepSpeed)
  int64_t fsdp_padded_shard = 0;  // fsdp: ceil(rows / world) rows of each parameter, summed
  int64_t fsdp_mine = 0;          // fsdp: the rank's own rows (the optimizer's), summed
  int64_t zero_mine = 0;          // zero: the rank's slice of the flat buffer that is parameters
  int64_t zero_kept = 0;  // zero: the gradients kept after backward, every parameter the slice crosses
                          // whole and the slice's padding (Note [Gradients between backward and step])
};

Elements Count(bool odd, int64_t world, int64_t rank) {
  Elements e;
  for (const Shape& s : Shapes(odd)) {
    const int64_t chunk = (s.rows + world - 1) / world;
    e.all += s.rows * s.rest;
    e.fsdp_padded_shard += chunk * s.rest;
    e.fsdp_mine += std::max<int64_t>(0, std::min(chunk, s.rows - rank * chunk)) * s.rest;
  }
  e.padded = (e.all + 2 * world - 1) / (2 * world) * (2 * world);
  const int64_t slice = e.padded / world;
  e.zero_mine = std::max<int64_t>(0, std::min(slice, e.all - rank * slice));
  int64_t at = 0;
  for (const Shape& s : Shapes(odd)) {  // DeepSpeed's get_partition_info: an element in the slice
    if (at < (rank + 1) * slice && at + s.rows * s.rest > rank * slice) e.zero_kept += s.rows * s.rest;
    at += s.rows * s.rest;
  }
  e.zero_kept += slice - e.zero_mine;
  return e;
}

// Stage by stage, at world 2 and 4, on the first and the last rank, float32 Adam (4 + 4 + 8 bytes a
// parameter) and pure bf16 AdamW as LibTorch keeps it (2 + 2 + 4: its state in the parameters' dtype):
// ddp keeps all; zero1 and zero2 divide the state and keep DeepSpeed's gradients after backward (the
// whole ones of the parameters their slice crosses, and zeros for its padding, not the paper's 1/world);
// fsdp divides all three, with its per-parameter padding (on the last rank of 4 the 3-row layer has no
// rows, and no state).
TEST(ParallelFsdp, EachStageHoldsTheZeroPapersBytesPerRank) {
  for (const bool bf16 : {false, true}) {
    const int64_t b = bf16 ? 2 : 4;  // bytes of a parameter, of a gradient; the state is two of them
    for (const bool odd : {false, true}) {
      for (const int64_t world : {2, 4}) {
        for (const int64_t rank : {int64_t{0}, world - 1}) {
          const Elements e = Count(odd, world, rank);
          struct Stage {
            std::string strategy;
            int64_t params, grads, state;
          };
          for (const Stage& s :
               {Stage{"ddp", b * e.all, b * e.all, 2 * b * e.all},
                Stage{"zero1", b * e.padded, b * e.zero_kept, 2 * b * e.zero_mine},
                Stage{"zero2", b * e.padded, b * e.zero_kept, 2 * b * e.zero_mine},
                Stage{"fsdp", b * e.fsdp_padded_shard, b * e.fsdp_padded_shard, 2 * b * e.fsdp_mine}}) {
            for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
              SCOPED_TRACE(s.strategy + " world " + std::to_string(world) + " rank " + std::to_string(rank) +
                           (odd ? " odd" : "") + (bf16 ? " bf16" : "") + (backend == Backend::kCpu ? " cpu" : " meta"));
              const VariantMeasurement m = Measure(Mlp(s.strategy, world, rank, odd, bf16), backend);
              EXPECT_EQ(m.param_bytes, s.params);
              EXPECT_EQ(*m.grad_bytes, s.grads);
              EXPECT_EQ(*m.optimizer_state_bytes, s.state);
            }
          }
        }
      }
    }
  }
  // Without padding, fsdp at world 4 is (4 + 4 + 8) N / 4 bytes: 16576 parameters, 66304 bytes.
  const Elements e = Count(false, 4, 1);
  // Rank 1's slice [4144, 8288) of 4 lies inside weight 1 ([0, 8192)) and ends in bias 1: 8192 + 128.
  EXPECT_EQ(e.zero_kept, 8192 + 128);
  EXPECT_EQ(e.fsdp_padded_shard, e.all / 4);
  EXPECT_EQ(16 * e.all / 4, 66304);
}

// cpu and meta over the fake group: the same allocations, the same peaks, phase by phase, every rank.
TEST(ParallelFsdp, CpuEqualsMetaToTheBytePerRank) {
  for (const int64_t world : {2, 4}) {
    for (int64_t rank = 0; rank < world; ++rank) {
      SCOPED_TRACE("world " + std::to_string(world) + " rank " + std::to_string(rank));
      const VariantMeasurement cpu = Measure(Mlp("fsdp", world, rank, /*odd=*/true), Backend::kCpu);
      const VariantMeasurement meta = Measure(Mlp("fsdp", world, rank, /*odd=*/true), Backend::kMeta);
      testing::ExpectSameBytes(cpu, meta);
      EXPECT_EQ(cpu.parallel, meta.parallel);
    }
  }
}

// Each unit (each linear) gathers world x its padded shard; bucket_bytes lists them in forward order.
TEST(ParallelFsdp, EachUnitGathersWorldTimesItsPaddedShard) {
  const VariantMeasurement m = Measure(Mlp("fsdp", 4, 3, /*odd=*/true), Backend::kMeta);
  ASSERT_TRUE(m.parallel.has_value());
  EXPECT_EQ(m.parallel->strategy, "fsdp");
  EXPECT_EQ(m.parallel->bucket_bytes,
            (std::vector<int64_t>{4 * (128 * 64 + 128), 4 * (64 * 128 + 64), 4 * (4 * 64 + 4)}));  // 3 rows padded to 4
  // "model": one unit, the root, holding every parameter.
  VariantSpec whole = Mlp("fsdp", 4, 3, /*odd=*/true);
  whole.parallel.unit = "model";
  EXPECT_EQ(Measure(whole, Backend::kMeta).parallel->bucket_bytes,
            (std::vector<int64_t>{4 * (128 * 64 + 128 + 64 * 128 + 64 + 4 * 64 + 4)}));
}

// A forward alone (no backward) peaks in the second unit's copy-out: the first unit's parameters are
// freed, but its flat all-gather output (world x its shard: the whole layer, 4 x (64 x 128 + 128)
// bytes) lives until that copy-out is done (Note [One FSDP2 rank]), beside the second's (4 x (128 x 64
// + 64)) and its weight, gathered; its bias (64 floats) is the allocation that reaches the peak. One
// byte under that peak, the OOM's breakdown says exactly that as communication_bytes.
TEST(ParallelFsdp, TheForwardPeakHoldsTwoAllGatherOutputsAndOneUnitsParameters) {
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    VariantSpec forward = Mlp("fsdp", 4, 1, /*odd=*/false);
    forward.loop.backward = false;
    forward.loop.optimizer.kind = "none";
    const VariantMeasurement m = testing::OneByteUnderThePeak(forward, backend);
    ASSERT_TRUE(m.oom.has_value());
    EXPECT_EQ(m.oom->phase, "forward");
    EXPECT_EQ(m.oom->requested_bytes, 64 * 4);
    EXPECT_EQ(m.oom->live.communication_bytes, 4 * (64 * 128 + 128) + 4 * (128 * 64 + 64) + 4 * 128 * 64);
    EXPECT_EQ(m.oom->live.parameters_bytes, 4 * 16576 / 4);
  }
}

// The step peaks in backward, in the first unit's copy-out: the second unit is done (its gradients
// reduce-scattered: the shard's 4 x (128 x 64 + 64) / 4 bytes are gradients, and its reduce-scatter
// input, 4 x (128 x 64 + 64), is kept until the next post-backward, as FSDP2's reduce_scatter_state),
// the first unit's flat all-gather output, prefetched while the second's backward ran, is live beside
// its weight, just gathered; its bias (128 floats) reaches the peak. In mixed precision (Note [FSDP2
// mixed precision]) the same moment, with bf16 gathered (b = 2 bytes) beside the float32 reduce-scatter
// input (twice the bf16 gradients it replaced).
TEST(ParallelFsdp, TheBackwardPeakHoldsThePrefetchedUnitAndTheLastReduceScatterInput) {
  for (const bool mixed : {false, true}) {
    const int64_t b = mixed ? 2 : 4;  // bytes of a gathered parameter
    for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
      VariantSpec step = Mlp("fsdp", 4, 1);
      if (mixed) {
        step.parallel.param_dtype = DType::kBFloat16;
        step.parallel.reduce_dtype = DType::kFloat32;
      }
      const VariantMeasurement m = testing::OneByteUnderThePeak(step, backend);
      ASSERT_TRUE(m.oom.has_value());
      EXPECT_EQ(m.oom->phase, "backward");
      EXPECT_EQ(m.oom->requested_bytes, 128 * b);
      EXPECT_EQ(m.oom->live.communication_bytes, b * (64 * 128 + 128) + b * 128 * 64 + 4 * (128 * 64 + 64));
      EXPECT_EQ(m.oom->live.gradients_bytes, 4 * (128 * 64 + 64) / 4);
    }
  }
}

// FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=float32) (Note [FSDP2 mixed precision]):
// the shards, sharded gradients and Adam state stay float32 (as without), cpu equals meta, and each unit
// gathers bf16 (half the bytes). Its backward peak: TheBackwardPeakHoldsThePrefetchedUnit... above.
TEST(ParallelFsdp, MixedPrecisionGathersBf16AndReduceScattersFloat32) {
  for (const int64_t world : {2, 4}) {
    for (const int64_t rank : {int64_t{0}, world - 1}) {
      SCOPED_TRACE("world " + std::to_string(world) + " rank " + std::to_string(rank));
      VariantSpec v = Mlp("fsdp", world, rank, /*odd=*/true);
      v.parallel.param_dtype = DType::kBFloat16;
      v.parallel.reduce_dtype = DType::kFloat32;
      const VariantMeasurement cpu = Measure(v, Backend::kCpu), meta = Measure(v, Backend::kMeta);
      testing::ExpectSameBytes(cpu, meta);
      const Elements e = Count(/*odd=*/true, world, rank);
      EXPECT_EQ(meta.param_bytes, 4 * e.fsdp_padded_shard);
      EXPECT_EQ(*meta.grad_bytes, 4 * e.fsdp_padded_shard);
      EXPECT_EQ(*meta.optimizer_state_bytes, 8 * e.fsdp_mine);
      EXPECT_EQ(meta.parallel->bucket_bytes,  // the 3-row layer padded to 4 rows at world 2 and 4
                (std::vector<int64_t>{2 * (128 * 64 + 128), 2 * (64 * 128 + 64), 2 * (4 * 64 + 4)}));
      EXPECT_EQ(meta.parallel->param_dtype, "bfloat16");  // what the reports say it ran at
      EXPECT_EQ(meta.parallel->reduce_dtype, "float32");
      EXPECT_FALSE(meta.parallel->master_weights);
    }
  }
}

// What the reports say a rank ran at (ParallelMeasurement::param_dtype, reduce_dtype) is the policy as
// FSDP2 clamps it (Note [FSDP2 mixed precision]): none without one, or with param_dtype the model's
// float32; a reduce_dtype equal to param_dtype, or none, reduces in param_dtype.
TEST(ParallelFsdp, FactsNameThePrecisionAsFsdp2ClampsIt) {
  using D = std::optional<DType>;
  const D none, f32 = DType::kFloat32, bf16 = DType::kBFloat16;
  const std::vector<std::tuple<D, D, std::string, std::string>> cases = {{none, none, "", ""},
                                                                         {f32, f32, "", ""},
                                                                         {f32, none, "", ""},
                                                                         {bf16, none, "bfloat16", "bfloat16"},
                                                                         {bf16, bf16, "bfloat16", "bfloat16"},
                                                                         {bf16, f32, "bfloat16", "float32"},
                                                                         {none, bf16, "float32", "bfloat16"}};
  for (const auto& [param, reduce, gathered, reduced] : cases) {
    VariantSpec v = Mlp("fsdp", 2, 0);
    v.parallel.param_dtype = param;
    v.parallel.reduce_dtype = reduce;
    const VariantMeasurement m = Measure(v, Backend::kMeta);
    ASSERT_TRUE(m.parallel.has_value());
    EXPECT_EQ(m.parallel->param_dtype, gathered) << gathered << "/" << reduced;
    EXPECT_EQ(m.parallel->reduce_dtype, reduced) << gathered << "/" << reduced;
  }
}

// FSDP2's meta-device init (Note [Meta-device init]): the net is built on meta, and setup holds only the
// rank's padded shards, never the whole model; from then on every phase is the device init's, byte for byte.
TEST(ParallelFsdp, MetaInitHoldsOnlyTheShardsAtSetup) {
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    const VariantSpec device = Mlp("fsdp", 4, 3, /*odd=*/true);
    VariantSpec meta = device;
    meta.parallel.init = "meta";
    const VariantMeasurement d = Measure(device, backend), m = Measure(meta, backend);
    const Elements e = Count(/*odd=*/true, 4, 3);
    EXPECT_EQ(m.param_bytes, 4 * e.fsdp_padded_shard);
    ASSERT_EQ(m.ledger.phase_peaks.size(), d.ledger.phase_peaks.size());
    for (size_t i = 0; i < d.ledger.phase_peaks.size(); ++i) {
      const PhasePeak &pd = d.ledger.phase_peaks[i], &pm = m.ledger.phase_peaks[i];
      ASSERT_EQ(pm.phase, pd.phase);
      if (pd.phase != "setup") {
        EXPECT_EQ(pm.peak_bytes, pd.peak_bytes) << pd.phase;
        continue;
      }
      EXPECT_EQ(pm.peak_bytes, 4 * e.fsdp_padded_shard);
      EXPECT_GE(pd.peak_bytes, 4 * e.all);  // the whole model, before fully_shard
    }
    EXPECT_EQ(m.iterations.back().live_after_bytes, d.iterations.back().live_after_bytes);
  }
}

// A small decoder as the llm scenarios shard it: a unit per transformer block, the embedding, the final
// norm and the head in the root, built on meta; with an evaluation (with and without no_grad) and
// gradients zeroed rather than freed (the next reduce-scatter's output is added into them). Every rank
// runs, cpu equals meta, and each rank holds its padded shards: the head's 10 rows pad to 12 at world 4.
TEST(ParallelFsdp, ADecoderShardedByBlocksRunsAlikeOnCpuAndMeta) {
  VariantSpec v = testing::ParallelDecoder(4, 0);
  v.loop.zero_grad = "zero";
  for (const bool no_grad : {true, false}) {
    v.loop.eval.batches = 2;
    v.loop.eval.no_grad = no_grad;
    for (int64_t rank = 0; rank < 4; ++rank) {
      SCOPED_TRACE("rank " + std::to_string(rank) + (no_grad ? " no_grad" : ""));
      v.parallel.rank = rank;
      const VariantMeasurement cpu = Measure(v, Backend::kCpu), meta = Measure(v, Backend::kMeta);
      testing::ExpectSameBytes(cpu, meta);
      ASSERT_EQ(cpu.parallel->bucket_bytes.size(), 3u);  // the root, then the two blocks
      // The root's: the embedding's 50 rows (13 a rank), the norm's 32 (8), the head's 10 (3) and bias.
      EXPECT_EQ(cpu.parallel->bucket_bytes[0], 4 * 4 * (13 * 32 + 8 + 8 + 3 * 32 + 3));
    }
  }
}

}  // namespace
}  // namespace oomguard
