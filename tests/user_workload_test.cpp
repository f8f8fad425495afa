// A registered workload's function measured in-process (MeasureWorkload): the same model as a catalog
// scenario's layer list, written with torch::nn and torch::optim, gives the same bytes on cpu and meta;
// knobs, phases and iterations behave as oomguard/workload.h says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <optional>

#include "scenario/scenario_loader.h"
#include "tests/catalog_variant.h"
#include "workload/workload.h"
#include "workload/workload_registry.h"

namespace oomguard {
namespace {

using ::testing::HasSubstr;

int64_t PeakIn(const VariantMeasurement& m, const std::string& phase) {
  for (const PhasePeak& p : m.ledger.phase_peaks) {
    if (p.phase == phase) return p.peak_bytes;
  }
  return -1;
}

// The same MLP as a module of one's own whose parameters are made with ctx.options(): it builds on
// meta too (torch::nn's modules cannot move there; see Context::Build).
struct FunctionalMlp : torch::nn::Module {
  explicit FunctionalMlp(const at::TensorOptions& options) {
    const int64_t sizes[3][2] = {{256, 512}, {512, 512}, {512, 10}};
    for (int i = 0; i < 3; ++i) {
      weights.push_back(register_parameter("w" + std::to_string(i), at::empty({sizes[i][1], sizes[i][0]}, options)));
      biases.push_back(register_parameter("b" + std::to_string(i), at::empty({sizes[i][1]}, options)));
    }
    at::NoGradGuard no_grad;
    for (at::Tensor& t : weights) t.uniform_(-0.05, 0.05);  // in place: no temporaries at setup
    for (at::Tensor& t : biases) t.zero_();
  }
  at::Tensor forward(at::Tensor x) {
    for (size_t i = 0; i < weights.size(); ++i) {
      x = at::linear(x, weights[i], biases[i]);
      if (i + 1 < weights.size()) x = at::relu(x);
    }
    return x;
  }
  std::vector<at::Tensor> weights, biases;
};

// scenarios/optimizer-state.json, as a user writes it: three linear layers with ReLUs, a 64 x 256 batch
// that starts on the host, cross entropy over 10 classes, the optimizer from the "optimizer" knob, the
// model from torch::nn ("modules": "torch_nn") or of its own ("functional"), the forward and the loss
// under bf16 autocast with "autocast": true.
void OptimizerStateMlp(Context& ctx) {
  const int64_t batch = ctx.Int("batch");
  const std::string kind = ctx.String("optimizer");
  std::function<at::Tensor(at::Tensor)> forward;
  std::vector<at::Tensor> parameters;
  if (ctx.String("modules") == "torch_nn") {
    auto model = ctx.Build([] {
      return torch::nn::Sequential(torch::nn::Linear(256, 512), torch::nn::ReLU(), torch::nn::Linear(512, 512),
                                   torch::nn::ReLU(), torch::nn::Linear(512, 10));
    });
    forward = [model](at::Tensor x) mutable { return model->forward(x); };
    parameters = model->parameters();
  } else {
    auto model = ctx.Build([&] { return std::make_shared<FunctionalMlp>(ctx.options()); });
    forward = [model](at::Tensor x) { return model->forward(x); };
    parameters = model->parameters();
  }
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (kind == "adam") {
    optimizer = std::make_unique<torch::optim::Adam>(parameters, torch::optim::AdamOptions(1e-3));
  } else {
    optimizer = std::make_unique<torch::optim::SGD>(parameters,
                                                    torch::optim::SGDOptions(0.01).momentum(ctx.Number("momentum", 0)));
  }
  ctx.Track(parameters);
  ctx.Track(*optimizer);
  for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) {
    {
      auto phase = ctx.Phase("zero_grad");
      optimizer->zero_grad(/*set_to_none=*/true);
    }
    {  // the micro-batch: its tensors are gone before the optimizer step, as in the catalog's loop
      at::Tensor x, target;
      {
        auto phase = ctx.Phase("transfer");
        {
          Context::HostMemory host;
          x = at::randn({batch, 256});
        }
        x = ctx.ToDevice(x);
        target = at::randint(0, 10, {batch}, ctx.options().dtype(at::kLong));
      }
      at::Tensor output, loss;
      {
        auto phase = ctx.Phase("forward");
        std::optional<Context::AutocastGuard> autocast;
        if (ctx.Bool("autocast", false)) autocast.emplace(ctx.Autocast(at::kBFloat16));
        output = forward(x);
        loss = torch::nn::functional::cross_entropy(output, target);
      }
      auto phase = ctx.Phase("backward");
      loss.backward();
    }
    auto phase = ctx.Phase("optimizer");
    optimizer->step();
  }
}

class SameBytesAsTheLayerList : public ::testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {};

TEST_P(SameBytesAsTheLayerList, OptimizerStateMlp) {
  const auto& [variant, backend, modules] = GetParam();
  const bool autocast = variant == "adam_autocast";
  VariantSpec layers = CatalogVariant("optimizer-state", autocast ? "adam" : variant);
  if (autocast) layers.loop.autocast = "bfloat16";
  VariantSpec workload;
  workload.name = variant;
  workload.workload = "optimizer_state_mlp";
  workload.seed = layers.seed;
  workload.loop.iterations = layers.loop.iterations;
  workload.knobs = {{"batch", int64_t{64}},
                    {"optimizer", std::string(variant.rfind("adam", 0) == 0 ? "adam" : "sgd")},
                    {"modules", modules},
                    {"autocast", autocast}};
  if (variant == "sgd_momentum") workload.knobs["momentum"] = 0.9;

  VariantMeasureOptions options;
  ASSERT_TRUE(Parse(backend, &options.backend));
  const VariantMeasurement expected = MeasureVariant(layers, options);
  const VariantMeasurement m = MeasureWorkload(OptimizerStateMlp, workload, options);
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  ASSERT_EQ(Name(expected.outcome), "pass") << expected.error;

  EXPECT_EQ(m.ledger.peak_bytes, expected.ledger.peak_bytes);
  EXPECT_EQ(m.ledger.peak_phase, expected.ledger.peak_phase);
  for (const char* phase : {"setup", "transfer", "forward", "backward", "optimizer", "zero_grad"}) {
    EXPECT_EQ(PeakIn(m, phase), PeakIn(expected, phase)) << phase;
  }
  EXPECT_EQ(m.param_bytes, 1597480);  // 399,370 float32 parameters
  EXPECT_EQ(m.param_bytes, expected.param_bytes);
  EXPECT_EQ(m.grad_bytes, expected.grad_bytes);
  EXPECT_EQ(m.optimizer_state_bytes, expected.optimizer_state_bytes);
  EXPECT_EQ(m.forward_saved_bytes, expected.forward_saved_bytes);
  EXPECT_EQ(m.transfers, expected.transfers);
  EXPECT_EQ(m.transfer_bytes, 2 * 64 * 256 * 4);  // a batch per iteration
  EXPECT_EQ(m.transfer_bytes, expected.transfer_bytes);
  ASSERT_EQ(m.iterations.size(), expected.iterations.size());
  for (size_t i = 0; i < m.iterations.size(); ++i) {
    EXPECT_EQ(m.iterations[i].peak_bytes, expected.iterations[i].peak_bytes) << i;
    EXPECT_EQ(m.iterations[i].live_after_bytes, expected.iterations[i].live_after_bytes) << i;
    EXPECT_EQ(m.iterations[i].live_after_backward_bytes, expected.iterations[i].live_after_backward_bytes) << i;
  }
}

std::string ParamName(const ::testing::TestParamInfo<SameBytesAsTheLayerList::ParamType>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" + std::get<2>(info.param);
}
INSTANTIATE_TEST_SUITE_P(TorchNnOnCpu, SameBytesAsTheLayerList,
                         // Not adam_autocast: torch::nn::functional::linear of a 2-d input is addmm(b, x, w.t()),
                         // and autocast does not cache the cast of a view, so the forward holds its copy of w
                         // differently from at::linear's (the layer list's, and FunctionalMlp's).
                         ::testing::Combine(::testing::Values("sgd", "sgd_momentum", "adam"), ::testing::Values("cpu"),
                                            ::testing::Values("torch_nn")),
                         ParamName);
INSTANTIATE_TEST_SUITE_P(OwnModuleOnCpuAndMeta, SameBytesAsTheLayerList,
                         ::testing::Combine(::testing::Values("sgd", "sgd_momentum", "adam", "adam_autocast"),
                                            ::testing::Values("cpu", "meta"), ::testing::Values("functional")),
                         ParamName);

TEST(UserWorkload, TorchNnModulesCannotBuildOnMetaAndSaySo) {
  VariantMeasureOptions options;
  options.backend = Backend::kMeta;
  const VariantMeasurement m =
      MeasureWorkload([](Context& ctx) { ctx.Build([] { return torch::nn::Linear(4, 4); }); }, VariantSpec{}, options);
  EXPECT_THAT(m.input_error, HasSubstr("ctx.Build: LibTorch cannot move a module's parameters to meta"));
}

VariantSpec WithKnobs(Knobs knobs, int64_t iterations = 2) {
  VariantSpec v;
  v.name = "base";
  v.workload = "test";
  v.knobs = std::move(knobs);
  v.loop.iterations = iterations;
  return v;
}

TEST(UserWorkload, AMissingKnobIsAnInputErrorNamingItsType) {
  const VariantMeasurement m = MeasureWorkload([](Context& ctx) { ctx.Int("hidden"); }, WithKnobs({}), {});
  EXPECT_EQ(Name(m.outcome), "error:error");
  EXPECT_EQ(m.input_error,
            "workload 'test' reads knob \"hidden\" (an integer), which variant 'base' does not set: add it under "
            "\"knobs\", e.g. \"knobs\": {\"hidden\": ...}");
}

TEST(UserWorkload, AMissingKnobNamesTheMisspeltOneTheVariantSets) {
  const VariantMeasurement m =
      MeasureWorkload([](Context& ctx) { ctx.Int("batch"); }, WithKnobs({{"bach", int64_t{8}}}), {});
  EXPECT_EQ(m.input_error,
            "workload 'test' reads knob \"batch\" (an integer), which variant 'base' does not set; it sets \"bach\": "
            "did you mean \"batch\"?");
}

TEST(UserWorkload, AKnobOfAnotherTypeIsAnInputError) {
  const VariantMeasurement m =
      MeasureWorkload([](Context& ctx) { ctx.Int("batch"); }, WithKnobs({{"batch", 64.5}}), {});
  EXPECT_EQ(m.input_error,
            "knob \"batch\" is read as an integer by workload 'test', but variant 'base' sets it to 64.5 (a number)");
}

TEST(UserWorkload, AKnobNeverReadIsAnInputErrorWithTheNearestName) {
  const VariantMeasurement m =
      MeasureWorkload([](Context& ctx) { ctx.Int("batch", 8); }, WithKnobs({{"bach", int64_t{64}}}), {});
  EXPECT_EQ(m.input_error,
            "variant 'base' sets knob \"bach\", which workload 'test' never reads; did you mean \"batch\"? (it "
            "reads: batch)");
}

TEST(UserWorkload, FallbacksAndNumbersFromIntegers) {
  double lr = 0;
  bool flag = false;
  std::string mode;
  int64_t batch = 0;
  const VariantMeasurement m = MeasureWorkload(
      [&](Context& ctx) {
        lr = ctx.Number("lr");  // set as 1: an integer reads as a number
        flag = ctx.Bool("flag", true);
        mode = ctx.String("mode", "fast");
        batch = ctx.Int("batch", 7);
      },
      WithKnobs({{"lr", int64_t{1}}, {"mode", std::string("slow")}}), {});
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  EXPECT_EQ(lr, 1.0);
  EXPECT_TRUE(flag);
  EXPECT_EQ(mode, "slow");
  EXPECT_EQ(batch, 7);
}

TEST(UserWorkload, AnUnknownPhaseIsAnInputErrorWithTheNearestName) {
  const VariantMeasurement m = MeasureWorkload([](Context& ctx) { ctx.SetPhase("fwd"); }, WithKnobs({}), {});
  EXPECT_THAT(m.input_error, HasSubstr("unknown phase \"fwd\""));
  EXPECT_THAT(m.input_error,
              HasSubstr("(phases: setup, transfer, forward, backward, optimizer, zero_grad, eval, step)"));
}

// A leak of 4 KiB per iteration (1024 floats kept in a vector that outlives the loop) shows as the
// live bytes after each iteration; the phase guard books the allocation under its phase and gives
// the previous phase back.
TEST(UserWorkload, IterationsRecordLiveBytesAndPhasesAreScoped) {
  std::vector<at::Tensor> kept;
  std::vector<std::string> phases_seen;
  const VariantMeasurement m = MeasureWorkload(
      [&](Context& ctx) {
        for (int64_t i : ctx.Iterations()) {
          auto phase = ctx.Phase("forward");
          kept.push_back(at::empty({1024 * i}, ctx.options()));
        }
      },
      WithKnobs({}, /*iterations=*/3), {});
  ASSERT_EQ(Name(m.outcome), "pass") << m.error;
  ASSERT_EQ(m.iterations.size(), 3u);
  EXPECT_EQ(m.iterations[0].live_after_bytes, 4096);
  EXPECT_EQ(m.iterations[1].live_after_bytes, 4096 + 8192);
  EXPECT_EQ(m.iterations[2].live_after_bytes, 4096 + 8192 + 12288);
  EXPECT_EQ(m.iterations[2].peak_bytes, 4096 + 8192 + 12288);
  EXPECT_EQ(PeakIn(m, "forward"), 4096 + 8192 + 12288);
  EXPECT_EQ(m.forward_saved_bytes, 4096);
  kept.clear();
}

TEST(UserWorkload, AnOomAtTheCapEndsTheRunWithTheCompletedIterationsAndABreakdown) {
  VariantMeasureOptions options;
  options.limits = LimitsForCap(10000);
  std::vector<at::Tensor> kept;
  const VariantMeasurement m = MeasureWorkload(
      [&](Context& ctx) {
        for ([[maybe_unused]] int64_t i : ctx.Iterations()) {
          auto phase = ctx.Phase("forward");
          kept.push_back(at::empty({1000}, ctx.options()));  // 4000 bytes per iteration
        }
      },
      WithKnobs({}, /*iterations=*/5), options);
  kept.clear();
  EXPECT_EQ(Name(m.outcome), "oom");
  EXPECT_EQ(m.iterations.size(), 2u);  // the third iteration asks for 12000 bytes in all
  ASSERT_TRUE(m.oom.has_value());
  EXPECT_EQ(m.oom->phase, "forward");
  EXPECT_EQ(m.oom->requested_bytes, 4000);
  EXPECT_EQ(m.oom->live_bytes, 8000);
  EXPECT_EQ(m.oom->live.activations_and_transient_bytes, 8000);
}

TEST(UserWorkload, IterationsTwiceIsAnInputError) {
  const VariantMeasurement m = MeasureWorkload(
      [](Context& ctx) {
        for ([[maybe_unused]] int64_t i : ctx.Iterations()) {
        }
        ctx.Iterations();
      },
      WithKnobs({}), {});
  EXPECT_EQ(m.input_error, "ctx.Iterations() is called once per run: loop over it once");
}

TEST(UserWorkload, AnUnregisteredWorkloadIsNamedWithTheRegisteredOnes) {
  ASSERT_TRUE(RegisterWorkload("registered_for_this_test", [](Context&) {}));
  EXPECT_FALSE(RegisterWorkload("registered_for_this_test", [](Context&) {}));  // taken
  EXPECT_FALSE(RegisterWorkload("not a name", [](Context&) {}));
  VariantSpec v = WithKnobs({});
  v.workload = "registered_for_this_tst";
  const VariantMeasurement m = MeasureVariant(v, {});
  EXPECT_EQ(Name(m.outcome), "error:error");
  EXPECT_THAT(m.input_error, HasSubstr("workload 'registered_for_this_tst' is not registered in this program; did "
                                       "you mean 'registered_for_this_test'?"));
}

}  // namespace
}  // namespace oomguard
