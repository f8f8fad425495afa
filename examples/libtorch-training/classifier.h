// The example's model: a two-layer MLP classifier with layer norm and dropout, written as a
// torch::nn::Module whose parameters are made with the options it is given, so that the same code
// builds on cpu, cuda and meta (LibTorch cannot move a built module to meta; see Context::Build).
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <memory>

namespace oomguard {
class Context;
}

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl(int64_t features, int64_t hidden, int64_t classes, const torch::TensorOptions& options);
  torch::Tensor forward(torch::Tensor x);

  torch::Tensor w1, b1, norm_weight, norm_bias, w2, b2;
  double dropout = 0.1;
};

// The images' features and the classes the workloads train on.
constexpr int64_t kFeatures = 784, kClasses = 10;

// The classifier with `hidden` units, built on ctx's device (its parameters tracked): the model both
// workloads (classifier.cpp, data_parallel.cpp) train.
std::shared_ptr<ClassifierImpl> BuildClassifier(oomguard::Context& ctx, int64_t hidden);
