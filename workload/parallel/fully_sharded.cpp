#include "workload/parallel/fully_sharded.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/engine.h>

#include <set>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <utility>

#include "base/check.h"
#include "nn/net.h"
#include "nn/scalar_type.h"
#include "workload/parallel/fsdp_state.h"
#include "workload/parallel/fsdp_storage.h"
#include "workload/parallel/rank_group.h"

namespace oomguard {

using fsdp_internal::Param;
using fsdp_internal::Unit;

FullySharded::FullySharded(const ParallelSpec& spec, std::vector<at::Tensor> parameters, const Net& net,
                           const at::TensorOptions& device)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.spec = spec;
  s.device = device.device();
  if (!parameters.empty()) s.orig_dtype = parameters.front().scalar_type();
  const auto scalar = [](std::optional<DType> d) { return d ? std::optional(ScalarTypeOf(*d)) : std::nullopt; };
  if (spec.reduce_dtype != spec.param_dtype) s.reduce_dtype = scalar(spec.reduce_dtype);
  if (spec.param_dtype && ScalarTypeOf(*spec.param_dtype) != s.orig_dtype) s.param_dtype = scalar(spec.param_dtype);
  s.group = MakeRankGroup(spec, s.device.type());
  s.units.emplace_back();  // the root
  s.units.front().reshard_after_forward = false;
  std::set<const c10::TensorImpl*> in_units;
  for (size_t i = 0; i < net.segments(); ++i) {
    const std::string name = net.segment_name(i);
    const std::string kind = name.substr(name.find(':') + 1);
    std::vector<at::Tensor> params = net.segment_parameters(i, i + 1);
    const bool unit = !params.empty() && spec.unit != "model" && (spec.unit == "layer" || spec.unit == kind);
    s.segment_unit.push_back(unit ? static_cast<int>(s.units.size()) : -1);
    if (!unit) continue;
    for (const at::Tensor& p : params) in_units.insert(p.unsafeGetTensorImpl());
    s.units.emplace_back();
    s.Shard(s.units.back(), std::move(params));
  }
  std::vector<at::Tensor> rest;
  for (const at::Tensor& p : parameters) {
    if (!in_units.count(p.unsafeGetTensorImpl())) rest.push_back(p);
  }
  s.Shard(s.units.front(), std::move(rest));
  for (const at::Tensor& p : parameters) {
    for (const Unit& unit : s.units) {
      for (const Param& q : unit.params) {
        if (q.module.is_same(p)) s.optimized.push_back(q.sharded);
      }
    }
  }
}

FullySharded::~FullySharded() = default;

const std::vector<at::Tensor>& FullySharded::OptimizerParameters() const { return state_->optimized; }

at::Tensor FullySharded::BeforeForward(at::Tensor input) {
  return BeforeSegment(0, state_->PreForward(0, std::move(input), state_));  // the root's pre-forward first
}

at::Tensor FullySharded::AfterSegment(size_t index, at::Tensor output) {
  State& s = *state_;
  if (s.segment_unit[index] >= 0) s.PostForward(static_cast<size_t>(s.segment_unit[index]), output, state_);
  return output;
}

at::Tensor FullySharded::BeforeSegment(size_t index, at::Tensor input) {
  State& s = *state_;
  if (index >= s.segment_unit.size() || s.segment_unit[index] < 0) return input;
  return s.PreForward(static_cast<size_t>(s.segment_unit[index]), std::move(input), state_);
}

at::Tensor FullySharded::AfterForward(at::Tensor output) {
  State& s = *state_;
  s.PostForward(0, output, state_);
  s.all_gather_state.reset();  // the root frees the last all-gather output
  return output;
}

void FullySharded::ZeroGrad(bool to_none) {
  for (at::Tensor& p : state_->optimized) {
    if (!p.grad().defined()) continue;
    if (to_none) {
      p.mutable_grad().reset();
    } else {
      p.mutable_grad().zero_();
    }
  }
}

int64_t FullySharded::ParameterBytes() const {
  int64_t bytes = 0;
  for (const Unit& unit : state_->units) {
    for (const Param& q : unit.params) bytes += static_cast<int64_t>(q.shard_data.nbytes());
  }
  return bytes;
}

int64_t FullySharded::GradientBytes() const {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : state_->optimized) grads.push_back(p.grad());
  int64_t bytes = StorageBytes(grads);
  for (const Unit& unit : state_->units) {
    for (const Param& q : unit.params) bytes += q.module.grad().defined() ? q.module.grad().nbytes() : 0;
  }
  return bytes;
}

void FullySharded::Attribute(LiveBreakdown* b) const {
  const State& s = *state_;
  std::vector<at::Tensor> grads,
      buffers = {s.all_gather_state, s.previous_all_gather_state, s.reduce_scatter_state, s.all_gather_cast};
  for (const at::Tensor& p : s.optimized) grads.push_back(p.grad());
  for (const Unit& unit : s.units) {
    buffers.push_back(unit.all_gather_output);
    for (const Param& q : unit.params) buffers.push_back(q.gathered);
  }
  const int64_t sharded_grads = StorageBytes(grads), communication = StorageBytes(buffers);
  MoveIntoCategories(b, sharded_grads, communication);
}

ParallelMeasurement FullySharded::Facts() const {
  const State& s = *state_;
  ParallelMeasurement m = FactsOf(s.spec);
  // The policy as clamped (Note [FSDP2 mixed precision]): gradients come in the gathered dtype, and are
  // reduced in it unless reduce_dtype says otherwise.
  const at::ScalarType gathered = s.param_dtype.value_or(s.orig_dtype), reduced = s.reduce_dtype.value_or(gathered);
  if (gathered != s.orig_dtype || reduced != s.orig_dtype) {
    m.param_dtype = DTypeName(gathered);
    m.reduce_dtype = DTypeName(reduced);
  }
  for (const Unit& unit : s.units) {
    if (!unit.params.empty()) {
      m.bucket_bytes.push_back(s.W() * unit.shard * c10::elementSize(s.param_dtype.value_or(s.orig_dtype)));
    }
  }
  return m;
}

}  // namespace oomguard
