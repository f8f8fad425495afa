// Net: what a workload trains, whatever its source (a scenario's layer list, and later a registered
// C++ function or a TorchScript module; nn/net_sources.h builds one from a ModelSpec). A net has
// parameters and a forward in train or eval mode; where its source can offer them, it also has
// ordered segments: pieces whose composition is the forward, each named, with its own parameters.
// The workload checkpoints segment ranges, applies the per-layer pitfall knobs between segments and
// books live bytes per segment; a net without segments runs only whole, and the workload refuses
// those knobs with an error naming them (workload/workload.h).
//
//   std::unique_ptr<oomguard::Net> net = oomguard::MakeNet(spec.model, options);
//   at::Tensor y = net->Forward(x, /*training=*/true);
//   if (net->segments() > 0) {
//     at::Tensor h = net->ForwardSegments(x, 0, 2, /*training=*/true, after);  // segments 0 and 1
//     net->segment_name(1);                                                     // "1:relu"
//   }
//
// Parameters are born on the device of the options the net was built with (meta needs that: LibTorch's
// Module::to(kMeta) cannot move modules there). Calling a segment method on a net without segments,
// or with a range past segments(), is a programmer bug and aborts.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/measurement.h"
#include "nn/layer_trace.h"

namespace oomguard {

// Called after segment `index` produced `output`; returns the tensor the next segment receives.
using AfterSegment = std::function<at::Tensor(size_t index, at::Tensor output)>;

class Net {
 public:
  virtual ~Net() = default;

  // Every parameter, in a fixed order (the optimizer's and the gradient digest's).
  virtual std::vector<at::Tensor> parameters() const = 0;
  // The whole forward on x; training enables dropout and the like.
  virtual at::Tensor Forward(const at::Tensor& x, bool training) = 0;
  // The whole forward on several inputs (a source whose forward takes them overrides this); the
  // default takes exactly one and calls Forward.
  virtual at::Tensor ForwardInputs(const std::vector<at::Tensor>& inputs, bool training);
  // Why the source offers no segments, for the error a knob that needs them gets; empty: it never does.
  virtual std::string WhyNoSegments() const;
  // A module file's facts and warnings, for the measurement; none by default.
  virtual std::optional<ModuleMeasurement> module_facts() const { return std::nullopt; }
  virtual std::vector<std::string> warnings() const { return {}; }

  // How many ordered segments the source offers; 0: none.
  virtual size_t segments() const { return 0; }
  // Segment i's name, which also names its output (an intermediate): "2:linear".
  virtual std::string segment_name(size_t i) const;
  // The parameters segments [begin, end) use (a checkpointed range lists them).
  virtual std::vector<at::Tensor> segment_parameters(size_t begin, size_t end) const;
  // Segments [begin, end) on x, calling after_segment (may be empty) after each one.
  virtual at::Tensor ForwardSegments(at::Tensor x, size_t begin, size_t end, bool training,
                                     const AfterSegment& after_segment);

  // Reports each segment the forward enters, for error messages; null (the default) reports nothing.
  void set_trace(LayerTrace* trace) { trace_ = trace; }

 protected:
  LayerTrace* trace() const { return trace_; }

 private:
  LayerTrace* trace_ = nullptr;
};

}  // namespace oomguard
