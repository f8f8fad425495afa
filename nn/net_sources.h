// The model sources: what builds a Net (nn/net.h) from a ModelSpec, by the name ModelSpec.source
// gives. Built in: "layers" (LayerNet, the scenario's layer list) and "torchscript" (TorchScriptNet,
// a module file).
//
//   std::unique_ptr<oomguard::Net> net = oomguard::MakeNet(spec.model, options);  // spec.model.source
//
//   // a test's fake, or a source outside the built-in table:
//   const bool added = oomguard::RegisterNetSource("fake", [](const ModelSpec&, const at::TensorOptions& o) {
//     return std::make_unique<FakeNet>(o);
//   });
//
// Adding a built-in source: one file defining its Net and factory, one line in kBuiltInSources
// (nn/net_sources.cpp). Registration and lookups may come from any thread.
//
// Error policy: a ModelSpec naming no registered source is a programmer bug (MakeNet aborts): the
// scenario's source was checked before it got here.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "nn/net.h"

namespace oomguard {

// Builds the net of `spec` with parameters created with `options` (device, dtype); seed ATen's
// default generator first, as parameters are drawn from it.
using NetFactory = std::function<std::unique_ptr<Net>(const ModelSpec& spec, const at::TensorOptions& options)>;

// Adds a source; false (nothing changes) when `name` is taken.
[[nodiscard]] bool RegisterNetSource(const std::string& name, NetFactory make);

// Whether a source is registered under `name`.
bool HasNetSource(const std::string& name);

// Every source's name: the built-in ones first, in table order, then the registered ones.
std::vector<std::string> NetSourceNames();

// The net of spec.source.
std::unique_ptr<Net> MakeNet(const ModelSpec& spec, const at::TensorOptions& options);

}  // namespace oomguard
