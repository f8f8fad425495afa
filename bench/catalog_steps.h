// What several benchmarks take from the catalog: a variant by name, and the 7B/70B decoders' step as
// plain LibTorch calls (the baseline the harness's MeasureVariant is compared with).
#pragma once

#include <torch/optim/adamw.h>

#include <stdexcept>
#include <string>

#include "nn/layers/layer_net.h"
#include "nn/scalar_type.h"
#include "scenario/scenario_loader.h"

#ifndef OOMGUARD_CATALOG_DIR
#error "the bench targets define OOMGUARD_CATALOG_DIR"
#endif

namespace oomguard::bench {

inline VariantSpec CatalogVariant(const std::string& scenario_name, const std::string& variant) {
  Scenario scenario;
  std::string error;
  if (!LoadScenarioFile(std::string(OOMGUARD_CATALOG_DIR) + "/" + scenario_name + ".json", &scenario, &error)) {
    throw std::runtime_error(error);
  }
  for (const VariantSpec& v : scenario.variants) {
    if (v.name == variant) return v;
  }
  throw std::runtime_error(scenario_name + " has no variant named " + variant);
}

// The step without oomguard's harness: the same layers, loss and AdamW, straight LibTorch calls.
inline void PlainStep(const VariantSpec& spec, const c10::Device& device) {
  const at::TensorOptions options = at::TensorOptions().device(device).dtype(ScalarTypeOf(spec.model.dtype));
  LayerNet net(spec.model, options);
  torch::optim::AdamW adamw(net.parameters(), torch::optim::AdamWOptions(1e-4));
  const at::Tensor ids = at::empty({spec.data.batch, spec.data.shape.at(0)}, options.dtype(at::kLong));
  const at::Tensor logits = net.Forward(ids, /*training=*/true);
  at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), ids.reshape({-1})).backward();
  adamw.step();
}

}  // namespace oomguard::bench
