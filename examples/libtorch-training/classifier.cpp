// The example's workload: train the classifier with Adam, then evaluate it, summing the evaluation
// loss as a tensor that is read once evaluation is over. Knob "eval_no_grad" false is the pitfall:
// without torch::NoGradGuard every evaluation batch's graph (its activations) stays alive in the
// running sum, and oomguard diagnoses eval-keeps-graph.
#include "classifier.h"

#include <oomguard/workload.h>
#include <torch/nn/functional.h>
#include <torch/optim/adam.h>

#include <cmath>
#include <optional>

namespace F = torch::nn::functional;

ClassifierImpl::ClassifierImpl(int64_t features, int64_t hidden, int64_t classes, const torch::TensorOptions& options) {
  w1 = register_parameter("w1", torch::empty({hidden, features}, options));
  b1 = register_parameter("b1", torch::empty({hidden}, options));
  norm_weight = register_parameter("norm_weight", torch::empty({hidden}, options));
  norm_bias = register_parameter("norm_bias", torch::empty({hidden}, options));
  w2 = register_parameter("w2", torch::empty({classes, hidden}, options));
  b2 = register_parameter("b2", torch::empty({classes}, options));
  torch::NoGradGuard no_grad;  // initialised in place: no temporaries
  w1.uniform_(-1 / std::sqrt(features), 1 / std::sqrt(features));
  w2.uniform_(-1 / std::sqrt(hidden), 1 / std::sqrt(hidden));
  b1.zero_();
  b2.zero_();
  norm_weight.fill_(1);
  norm_bias.zero_();
}

torch::Tensor ClassifierImpl::forward(torch::Tensor x) {
  x = F::linear(x, w1, b1);
  x = F::layer_norm(x, F::LayerNormFuncOptions({w1.size(0)}).weight(norm_weight).bias(norm_bias));
  x = F::dropout(torch::relu(x), F::DropoutFuncOptions().p(dropout).training(is_training()));
  return F::linear(x, w2, b2);
}

std::shared_ptr<ClassifierImpl> BuildClassifier(oomguard::Context& ctx, int64_t hidden) {
  auto model = ctx.Build([&] { return std::make_shared<ClassifierImpl>(kFeatures, hidden, kClasses, ctx.options()); });
  ctx.Track(model->parameters());
  return model;
}

OOMGUARD_WORKLOAD(classifier_adam) {
  const int64_t batch = ctx.Int("batch");
  const int64_t hidden = ctx.Int("hidden", 2048);
  const int64_t eval_batches = ctx.Int("eval_batches", 8);
  const bool eval_no_grad = ctx.Bool("eval_no_grad", true);

  auto model = BuildClassifier(ctx, hidden);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  ctx.Track(adam);

  // A batch of images and labels that starts on the host, as a data loader's does.
  const auto next_batch = [&] {
    torch::Tensor images;
    {
      oomguard::Context::HostMemory host;
      // host_options(): the cpu, or meta on meta, where drawing gigabytes of values nothing reads would
      // cost every run and fit trial this machine's memory.
      images = torch::randn({batch, kFeatures}, ctx.host_options());
    }
    return std::pair(ctx.ToDevice(images), torch::randint(0, kClasses, {batch}, ctx.options().dtype(torch::kLong)));
  };

  for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) {
    model->train();
    {
      auto phase = ctx.Phase("zero_grad");
      adam.zero_grad();
    }
    {
      torch::Tensor loss;
      {
        auto phase = ctx.Phase("transfer");
        auto [images, labels] = next_batch();
        auto forward = ctx.Phase("forward");
        loss = F::cross_entropy(model->forward(images), labels);
      }
      auto phase = ctx.Phase("backward");
      loss.backward();
    }
    {
      auto phase = ctx.Phase("optimizer");
      adam.step();
    }
    torch::Tensor eval_loss;  // the evaluation's summed loss, read once it is over (for a log line)
    {
      auto phase = ctx.Phase("eval");
      model->eval();
      std::optional<torch::NoGradGuard> no_grad;
      if (eval_no_grad) no_grad.emplace();
      eval_loss = torch::zeros({}, ctx.options());
      for (int64_t b = 0; b < eval_batches; ++b) {
        auto [images, labels] = next_batch();
        eval_loss = eval_loss + F::cross_entropy(model->forward(images), labels);
      }
    }
    if (ctx.has_data()) {  // the mean evaluation loss, as a training loop logs it (meta has no values to read)
      [[maybe_unused]] const double mean_eval_loss = eval_loss.item<double>() / static_cast<double>(eval_batches);
    }
  }
}
