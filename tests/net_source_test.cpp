// nn/net.h and nn/net_sources.h: a model source registered here (a net with no segments) trained by
// the workload, byte by byte, and the error for a knob that needs segments; the layer list's net.
//
// The fake net: y = x w^T with one weight w [2, 4] (32 bytes), batch x [3, 4] made on the device.
//   forward leaves live: the output (3*2*4 = 24 bytes; mm saves x and w, no copies) and the loss (4).
#include <gtest/gtest.h>

#include "nn/layers/layer_net.h"
#include "nn/net_sources.h"
#include "workload/workload.h"

namespace oomguard {
namespace {

class WholeNet : public Net {
 public:
  explicit WholeNet(const at::TensorOptions& options) : w_(at::randn({2, 4}, options).requires_grad_()) {}
  std::vector<at::Tensor> parameters() const override { return {w_}; }
  at::Tensor Forward(const at::Tensor& x, bool) override { return at::matmul(x, w_.t()); }

 private:
  at::Tensor w_;
};

void RegisterWholeSource() {
  static const bool registered = RegisterNetSource(
      "whole", [](const ModelSpec&, const at::TensorOptions& o) { return std::make_unique<WholeNet>(o); });
  ASSERT_TRUE(registered);
}

VariantSpec WholeModel() {
  RegisterWholeSource();
  VariantSpec v;
  v.name = "whole";
  v.model.source = "whole";
  v.data.batch = 3;
  v.data.shape = {4};
  v.data.on_host = false;
  v.loop.iterations = 2;
  v.loop.loss = "mean";
  v.loop.optimizer.kind = "sgd";
  return v;
}

TEST(NetSources, TheLayerListIsBuiltInAndNamesAreNotTakenTwice) {
  RegisterWholeSource();
  EXPECT_TRUE(HasNetSource("layers"));
  EXPECT_TRUE(HasNetSource("whole"));
  EXPECT_TRUE(HasNetSource("torchscript"));
  EXPECT_FALSE(HasNetSource("onnx"));
  EXPECT_EQ(NetSourceNames(), (std::vector<std::string>{"layers", "torchscript", "whole"}));
  EXPECT_FALSE(RegisterNetSource(
      "layers", [](const ModelSpec&, const at::TensorOptions& o) { return std::make_unique<WholeNet>(o); }));
}

TEST(NetSources, AWorkloadTrainsANetWithoutSegmentsExactly) {
  for (const Backend backend : {Backend::kCpu, Backend::kMeta}) {
    VariantMeasureOptions options;
    options.backend = backend;
    const VariantMeasurement m = MeasureVariant(WholeModel(), options);
    ASSERT_EQ(Name(m.outcome), "pass") << m.error;
    EXPECT_EQ(m.param_bytes, 32);
    EXPECT_EQ(m.grad_bytes, 32);
    EXPECT_EQ(m.optimizer_state_bytes, 0);
    EXPECT_EQ(m.forward_saved_bytes, 24 + 4);
    ASSERT_EQ(m.iterations.size(), 2u);
    EXPECT_EQ(m.iterations[0].live_after_bytes, 32 + 32);  // the weight and its gradient
    EXPECT_EQ(m.iterations[1].live_after_bytes, 32 + 32);
    // In backward, with the batch (48), the weight, the output and the loss live: the loss's seed
    // gradient (4), the output's gradient (24) and w.grad (32).
    EXPECT_EQ(m.ledger.peak_bytes, 48 + 32 + 24 + 4 + 4 + 24 + 32) << Name(backend);
    EXPECT_EQ(m.attention, "none");
  }
}

TEST(NetSources, ASegmentKnobOnANetWithoutSegmentsIsAnError) {
  VariantSpec v = WholeModel();
  v.pitfalls.checkpoint.segments = 2;
  VariantMeasurement m = MeasureVariant(v, VariantMeasureOptions{});
  EXPECT_EQ(Name(m.outcome), "error:error");
  EXPECT_EQ(m.error,
            "model source 'whole' offers no segments, and pitfalls.checkpoint.segments = 2 needs them "
            "(checkpointing and the per-layer knobs act between segments)");
  EXPECT_EQ(m.input_error, m.error);  // bad input: the variant is UNRESOLVED, the run exits 2
  EXPECT_TRUE(m.iterations.empty());
  EXPECT_EQ(m.param_bytes, 32);

  v = WholeModel();
  v.pitfalls.inplace.target = "output";
  m = MeasureVariant(v, VariantMeasureOptions{});
  EXPECT_EQ(m.error,
            "model source 'whole' offers no segments, and pitfalls.inplace.target = \"output\" needs them "
            "(checkpointing and the per-layer knobs act between segments)");

  v = WholeModel();
  v.pitfalls.retain_grad = true;
  m = MeasureVariant(v, VariantMeasureOptions{});
  EXPECT_EQ(m.error,
            "model source 'whole' offers no segments, and pitfalls.retain_grad = true needs them "
            "(checkpointing and the per-layer knobs act between segments)");

  v = WholeModel();
  v.pitfalls.keep_intermediates = true;
  m = MeasureVariant(v, VariantMeasureOptions{});
  EXPECT_EQ(m.error,
            "model source 'whole' offers no segments, and pitfalls.keep_intermediates = true needs them "
            "(checkpointing and the per-layer knobs act between segments)");
}

TEST(NetSources, TheLayerListsNetHasOneSegmentPerLayer) {
  ModelSpec spec;
  LayerSpec linear;
  linear.kind = "linear";
  linear.in = 4;
  linear.out = 8;
  LayerSpec relu;
  relu.kind = "relu";
  spec.layers = {linear, relu};
  const std::unique_ptr<Net> net = MakeNet(spec, at::TensorOptions().device(at::kCPU));
  ASSERT_EQ(net->segments(), 2u);
  EXPECT_EQ(net->segment_name(0), "0:linear");
  EXPECT_EQ(net->segment_name(1), "1:relu");
  EXPECT_EQ(net->parameters().size(), 2u);  // weight and bias
  EXPECT_EQ(net->segment_parameters(0, 1).size(), 2u);
  EXPECT_TRUE(net->segment_parameters(1, 2).empty());
  std::vector<size_t> seen;
  const at::Tensor y = net->ForwardSegments(at::empty({3, 4}, at::TensorOptions().device(at::kCPU)), 0, 2, true,
                                            [&](size_t i, at::Tensor out) {
                                              seen.push_back(i);
                                              return out;
                                            });
  EXPECT_EQ(seen, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(net->Forward(at::empty({3, 4}, at::TensorOptions().device(at::kCPU)), false).sizes(),
            (std::vector<int64_t>{3, 8}));
}

}  // namespace
}  // namespace oomguard
