// The harness of the meta-against-cpu op tests (meta_model_ops_test.cpp, meta_op_bytes_test.cpp): a
// model's parameters made in setup, a training step with evaluation, and one workload measured on both
// backends with the kernels each ran.
//
//   const Both m = MeasureOnBoth([](Context& ctx) { Parameters p(ctx); ... TrainAndEvaluate(ctx, p, forward); });
//   ExpectSameAllocations(m);
//   EXPECT_TRUE(m.CpuRan("aten::_scaled_dot_product_flash_attention_for_cpu"));
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "oomguard/workload.h"
#include "tests/same_bytes.h"
#include "workload/workload.h"

namespace oomguard::testing {

// A model's parameters: plain tensors that require grad, made with ctx.options() (on meta, torch::nn
// modules cannot be built; see Context::Build), drawn in place so setup makes no temporaries. Each is
// used once per step or more: two uses sum two gradients, in place on cpu and on meta alike (Note
// [Gradient sums on meta], backends/meta/kernels/meta_kernels_promote.cpp).
class Parameters {
 public:
  explicit Parameters(Context& ctx) : ctx_(ctx) {}
  at::Tensor Add(at::IntArrayRef sizes, double value = 0.0) { return Add(sizes, ctx_.options(), value); }
  at::Tensor Add(at::IntArrayRef sizes, at::ScalarType dtype) { return Add(sizes, ctx_.options().dtype(dtype), 0.0); }
  at::Tensor Add(at::IntArrayRef sizes, const at::TensorOptions& options, double value) {
    at::Tensor p = at::empty(sizes, options);
    {
      at::NoGradGuard no_grad;
      value == 0.0 ? p.uniform_(-0.1, 0.1) : p.fill_(value);
    }
    all_.push_back(p.requires_grad_(true));
    return p;
  }
  at::Tensor Buffer(at::IntArrayRef sizes, double value) { return at::full(sizes, value, ctx_.options()); }
  // zero_grad(set_to_none): each backward makes fresh gradients (accumulating into existing ones is such
  // a sum too).
  void ZeroGrad() {
    for (at::Tensor& p : all_) p.mutable_grad().reset();
  }
  const std::vector<at::Tensor>& all() const { return all_; }

 private:
  Context& ctx_;
  std::vector<at::Tensor> all_;
};

// One training step per iteration: forward (a batch and the loss), backward, then an evaluation forward
// without gradients.
using Forward = std::function<at::Tensor(bool training)>;
inline void TrainAndEvaluate(Context& ctx, Parameters& params, const Forward& forward) {
  ctx.Track(params.all());
  for (int64_t iteration : ctx.Iterations()) {
    (void)iteration;
    {
      auto phase = ctx.Phase("zero_grad");
      params.ZeroGrad();
    }
    at::Tensor loss;
    {
      auto phase = ctx.Phase("forward");
      loss = forward(true);
    }
    {
      auto phase = ctx.Phase("backward");
      loss.backward();
    }
    auto phase = ctx.Phase("eval");
    at::NoGradGuard no_grad;
    at::Tensor eval_loss = forward(false);
  }
}

// The kernels a backend ran, by their RecordFunction names.
class KernelNames {
 public:
  KernelNames()
      : handle_(at::addGlobalCallback(
            at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
              if (active_ != nullptr) active_->insert(fn.name());
              return nullptr;
            }).scopes({at::RecordScope::FUNCTION}))) {
    active_ = &names_;
  }
  ~KernelNames() {
    at::removeCallback(handle_);
    active_ = nullptr;
  }
  const std::set<std::string>& names() const { return names_; }

 private:
  static inline std::set<std::string>* active_ = nullptr;
  std::set<std::string> names_;
  at::CallbackHandle handle_;
};

struct Both {
  VariantMeasurement cpu, meta;
  std::set<std::string> cpu_kernels, meta_kernels;
  bool CpuRan(const std::string& op) const { return cpu_kernels.count(op) > 0; }
  bool MetaRan(const std::string& op) const { return meta_kernels.count(op) > 0; }
};

// One iteration of `workload` on `backend`, with one intra-op thread as in the runner's children.
inline VariantMeasurement MeasureOneIteration(Backend backend, const WorkloadFunction& workload) {
  at::set_num_threads(1);
  VariantSpec spec;
  spec.loop.iterations = 1;
  VariantMeasureOptions options;
  options.backend = backend;
  return MeasureWorkload(workload, spec, options);
}

// As in the runner's children: one intra-op thread (scratch buffers are per thread).
inline Both MeasureOnBoth(const WorkloadFunction& workload) {
  at::set_num_threads(1);
  VariantSpec spec;
  spec.name = "model_ops";
  spec.loop.iterations = 2;
  Both both;
  VariantMeasureOptions options;
  {
    KernelNames names;
    options.backend = Backend::kCpu;
    both.cpu = MeasureWorkload(workload, spec, options);
    both.cpu_kernels = names.names();
  }
  KernelNames names;
  options.backend = Backend::kMeta;
  both.meta = MeasureWorkload(workload, spec, options);
  both.meta_kernels = names.names();
  return both;
}

inline void ExpectSameAllocations(const Both& m) {
  ASSERT_EQ(Name(m.cpu.outcome), "pass") << m.cpu.error;
  ASSERT_EQ(Name(m.meta.outcome), "pass") << m.meta.error;
  testing::ExpectSameBytes(m.cpu, m.meta);
}

}  // namespace oomguard::testing
