// The MLP the parallel tests measure one rank of (parallel_strategies_test.cpp, parallel_fsdp_test.cpp):
// linear 64 -> 128, relu, linear 128 -> 64, and with `odd` linear 64 -> 3 (3 rows: no multiple of 2 or
// 4); batch 8, two iterations, Adam (float32) or AdamW (bf16: model and data).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "workload/workload.h"

namespace oomguard::testing {

inline VariantSpec ParallelMlp(const std::string& strategy, int64_t world, int64_t rank = 0, bool odd = false,
                               bool bf16 = false) {
  VariantSpec v;
  v.name = "v";
  v.model.layers = {LayerSpec{.kind = "linear", .in = 64, .out = 128}, LayerSpec{.kind = "relu"},
                    LayerSpec{.kind = "linear", .in = 128, .out = 64}};
  if (odd) v.model.layers.push_back(LayerSpec{.kind = "linear", .in = 64, .out = 3});
  if (bf16) v.model.dtype = v.data.dtype = DType::kBFloat16;
  v.data.batch = 8;
  v.data.shape = {64};
  v.loop.iterations = 2;
  v.loop.optimizer.kind = bf16 ? "adamw" : "adam";
  v.parallel.world = world;
  v.parallel.rank = rank;
  v.parallel.strategy = strategy;
  return v;
}

// A small decoder as the llm scenarios shard it under fsdp: embedding (50 ids, dim 32), two
// transformer blocks (the units), layer_norm, a 10-class head; sequences of 16, built on meta.
inline VariantSpec ParallelDecoder(int64_t world, int64_t rank) {
  VariantSpec v = ParallelMlp("fsdp", world, rank);
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
  return v;
}

// The variant measured, which must pass.
inline VariantMeasurement MeasurePassing(const VariantSpec& spec, Backend backend) {
  VariantMeasurement m = MeasureVariant(spec, VariantMeasureOptions{.backend = backend});
  EXPECT_EQ(Name(m.outcome), "pass") << m.error;
  return m;
}

// `spec` again, capped one byte under its peak: it runs out of memory at the allocation that made
// the peak, and m.oom says what was live then.
inline VariantMeasurement OneByteUnderThePeak(const VariantSpec& spec, Backend backend) {
  VariantMeasureOptions options{.backend = backend};
  options.limits.cap_bytes = MeasurePassing(spec, backend).ledger.peak_bytes - 1;
  VariantMeasurement m = MeasureVariant(spec, options);
  EXPECT_EQ(Name(m.outcome), "oom") << m.error;
  return m;
}

}  // namespace oomguard::testing
