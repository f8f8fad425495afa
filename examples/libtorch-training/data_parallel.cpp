// The example's data-parallel workload: the classifier of classifier.cpp trained on every rank of
// the scenario's "parallel": {"world": N}, each rank on batches of its own, its gradients averaged
// over the ranks by hand through ctx.ProcessGroup() before Adam's step, as DistributedDataParallel
// does. On cpu the N ranks are N processes joined by Gloo (the averaging moves real numbers); on meta
// one rank of N is measured alone, its collectives on c10d's FakeProcessGroup.
//
// Knob "flat_bucket": false all-reduces each gradient in place (one collective per parameter, no
// memory besides the gradients); true copies every gradient into one flat buffer, all-reduces it once
// and copies the averages back, as DDP's buckets do (fewer, larger collectives, for one more copy of
// the gradients while it lasts: the memory DDP's gradient_as_bucket_view saves).
#include <oomguard/workload.h>
#include <torch/nn/functional.h>
#include <torch/optim/adam.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <vector>

#include "classifier.h"

namespace F = torch::nn::functional;

namespace {

// Every gradient becomes its mean over the ranks: a sum by all-reduce, divided by the world size.
void AverageGradients(const std::vector<torch::Tensor>& parameters, bool flat_bucket, c10d::Backend& group) {
  const double world = static_cast<double>(group.getSize());
  if (!flat_bucket) {
    for (const torch::Tensor& p : parameters) {
      std::vector<torch::Tensor> grad{p.grad()};
      group.allreduce(grad)->wait();
      p.grad().div_(world);
    }
    return;
  }
  std::vector<torch::Tensor> flat_grads;
  for (const torch::Tensor& p : parameters) flat_grads.push_back(p.grad().view(-1));
  std::vector<torch::Tensor> bucket{torch::cat(flat_grads)};
  group.allreduce(bucket)->wait();
  bucket[0].div_(world);
  int64_t offset = 0;
  for (const torch::Tensor& p : parameters) {
    p.grad().view(-1).copy_(bucket[0].narrow(0, offset, p.numel()));
    offset += p.numel();
  }
}

}  // namespace

OOMGUARD_WORKLOAD(classifier_data_parallel) {
  const int64_t batch = ctx.Int("batch");  // per rank
  const int64_t hidden = ctx.Int("hidden", 2048);
  const bool flat_bucket = ctx.Bool("flat_bucket", false);

  // Every rank seeds ATen with the scenario's seed, so the models start equal (DDP broadcasts rank 0's).
  auto model = BuildClassifier(ctx, hidden);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  ctx.Track(adam);
  // Rank Rank() of WorldSize(): Gloo's on cpu at world > 1, else a FakeProcessGroup (no data moves).
  const c10::intrusive_ptr<c10d::Backend> group = ctx.ProcessGroup();
  // Each rank draws batches of its own, as a DistributedSampler's shard of the data set.
  torch::manual_seed(static_cast<uint64_t>(ctx.seed() + 1 + ctx.Rank()));

  for ([[maybe_unused]] int64_t iteration : ctx.Iterations()) {
    {
      torch::Tensor loss;
      {
        auto phase = ctx.Phase("forward");
        torch::Tensor images = torch::randn({batch, kFeatures}, ctx.options());
        loss = F::cross_entropy(model->forward(images),
                                torch::randint(0, kClasses, {batch}, ctx.options().dtype(torch::kLong)));
      }
      auto phase = ctx.Phase("backward");  // DDP averages inside backward too, bucket by bucket
      loss.backward();
      AverageGradients(model->parameters(), flat_bucket, *group);
    }
    auto phase = ctx.Phase("optimizer");
    adam.step();
    adam.zero_grad();  // set_to_none: the gradients are freed until the next backward
  }
}
