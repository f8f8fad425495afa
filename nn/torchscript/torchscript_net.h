// TorchScriptNet: the Net of a TorchScript module file (model.torchscript; source "torchscript"), a
// Python model brought in with torch.jit.script(model).save("m.pt") or torch.jit.trace.
//
//   oomguard::TorchScriptNet net(spec.model, at::TensorOptions().device(at::kMeta), /*has_data=*/false);
//   at::Tensor logits = net.ForwardInputs({ids, mask}, /*training=*/true);
//
// Loading: the file is read with the tracking allocators told to look away (its host buffers, and the
// meta tensors of a file saved from the meta device, are the loader's, not the run's); then every
// parameter and buffer is made anew on the run's device, inside the measurement: a copy of the saved
// weights, or, for a file saved from meta on a backend with data, values drawn from the seed
// (Note [Weights of a module saved from meta]). One small file runs on every backend.
//
// Segments: the top-level children of an nn.Sequential, in order, named "<index>:<Type>"; any other
// module runs whole, and WhyNoSegments says so for the knobs that need segments. The layer trace
// (nn/layer_trace.h) names each segment's forward "layer <index>:<Type>", a whole forward "module <Type>".
//
// Note [Eager autograd for TorchScript]: with the graph executor's optimisation on, a module's
// autograd is not eager autograd (differentiable subgraphs save what the JIT chooses, the first
// iteration runs a profiling plan and later ones an optimised plan, and fusion differs by device).
// The net turns optimisation and fusion off (setGraphExecutorOptimize is thread-local, and a plan is
// cached at the first forward) on the thread of every forward, before it runs, so each op records
// the autograd node eager PyTorch records and saves what it saves.
//
// Errors: a file that does not load (torch::jit::load's c10::Error, or its std::runtime_error for code
// it cannot compile and classes it does not know), a tensor record shorter than its storage, a byte
// order other than little-endian, attributes nested past limits::kMaxAttributeNesting, or a forward
// whose result holds no tensor, throws ModelFileError (bad input: the variant is UNRESOLVED, exit 2);
// what LibTorch throws while running the module is the run's outcome like any other.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "nn/net.h"

namespace oomguard {

class ModelFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class TorchScriptNet : public Net {
 public:
  // Loads spec.torchscript; parameters are made with options' device. has_data: the backend's tensors
  // hold values (seeded weights are drawn then; on meta they are shapes).
  TorchScriptNet(const ModelSpec& spec, const at::TensorOptions& options, bool has_data);
  ~TorchScriptNet() override;

  std::vector<at::Tensor> parameters() const override;
  at::Tensor Forward(const at::Tensor& x, bool training) override { return ForwardInputs({x}, training); }
  at::Tensor ForwardInputs(const std::vector<at::Tensor>& inputs, bool training) override;
  std::string WhyNoSegments() const override;

  size_t segments() const override;
  std::string segment_name(size_t i) const override;
  std::vector<at::Tensor> segment_parameters(size_t begin, size_t end) const override;
  at::Tensor ForwardSegments(at::Tensor x, size_t begin, size_t end, bool training,
                             const AfterSegment& after_segment) override;

  std::optional<ModuleMeasurement> module_facts() const override;
  std::vector<std::string> warnings() const override;

 private:
  struct Loaded;  // the torch::jit::Module and its children: jit headers stay in the .cpp
  std::unique_ptr<Loaded> loaded_;
};

}  // namespace oomguard
