// The TorchScript tests' modules and the variants that train them (tests/torchscript/make_fixtures.py
// writes the files, a CTest fixture, into $OOMGUARD_TORCHSCRIPT_FIXTURES): for torchscript_test.cpp and
// torchscript_bad_input_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "workload/workload.h"

namespace oomguard::testing {

inline std::string Fixture(const std::string& name) {
  const char* folder = std::getenv("OOMGUARD_TORCHSCRIPT_FIXTURES");
  EXPECT_NE(folder, nullptr) << "run through ctest: the TorchScript.Fixtures test writes the files";
  return std::string(folder == nullptr ? "." : folder) + "/" + name;
}

inline LayerSpec Layer(const std::string& kind, int64_t in = 0, int64_t out = 0) {
  LayerSpec l;
  l.kind = kind;
  l.in = in;
  l.out = out;
  return l;
}

// Batch 8 of 16 features, mse, AdamW, an evaluation batch; the model is the caller's. (Not
// cross_entropy: a layer list draws its targets with the batch, a module after its forward, shaped
// like its output; pytorch_eager_check.py checks a module's against eager PyTorch.)
inline VariantSpec Training() {
  VariantSpec v;
  v.name = "v";
  v.seed = 2;
  v.data.batch = 8;
  v.data.shape = {16};
  v.data.classes = 4;
  v.loop.loss = "mse";
  v.loop.optimizer.kind = "adamw";
  v.loop.eval.batches = 1;
  return v;
}

inline VariantSpec Module(const std::string& file) {
  VariantSpec v = Training();
  v.model.source = "torchscript";
  v.model.torchscript = Fixture(file);
  return v;
}

inline VariantSpec LayerList() {
  VariantSpec v = Training();
  v.model.layers = {Layer("linear", 16, 32), Layer("relu"), Layer("linear", 32, 4)};
  return v;
}

inline VariantMeasurement Measured(const VariantSpec& spec, Backend backend) {
  VariantMeasureOptions options;
  options.backend = backend;
  return MeasureVariant(spec, options);
}

// A tagger of make_fixtures.py (token ids [8, 12] from a vocabulary of 50, 4 tags per token).
inline VariantSpec Tagger(const std::string& file) {
  VariantSpec v = Module(file);
  v.data.shape = {12};
  v.data.dtype = DType::kInt64;
  v.data.vocab = 50;
  v.data.classes = 4;
  v.loop.loss = "cross_entropy";
  return v;
}

}  // namespace oomguard::testing
