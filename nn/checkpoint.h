// Activation checkpointing for LibTorch C++, which has none (pytorch/pytorch#52744): a segment's
// intermediate activations are dropped after the forward and recomputed during the backward.
//
//   oomguard::Segment block = [w, b](const at::Tensor& x) { return at::tanh(at::linear(x, w, b)); };
//   at::Tensor h = oomguard::Checkpoint(block, x, {w, b}, /*preserve_rng_state=*/true);
//   loss(h).backward();  // runs `block` a second time; w.grad(), b.grad() and x.grad() as without checkpointing
//
// Contract:
// - Memory: the forward keeps `input` (saved for the recomputation; the backward releases it), the output and,
//   as long as the autograd graph holding the checkpoint lives, a copy of `segment` with whatever it captures
//   and, with preserve_rng_state, the generator states (a 5056-byte cpu tensor, plus a small one for a cuda
//   input); nothing the segment computes in between. The backward holds one segment's recomputed activations
//   at a time. A whole model as one segment raises the peak: its recomputed output joins the forward's.
// - Gradients: the same as running `segment` directly, bit for bit, when the recomputation computes the same
//   values (deterministic kernels; random ops need preserve_rng_state). They reach `input` when it requires
//   grad and every tensor in `params` that requires grad; .grad accumulates exactly as without checkpointing.
//   Only the gradients a backward asks for are computed (autograd::grad(loss, {w}) does not differentiate
//   the input).
// - `params` must hold every tensor requiring grad that `segment` uses besides `input`: captured weights, and
//   tensors computed from them outside the segment (a tied w.t(): list that tensor itself). The backward walks
//   the recomputed graph and throws if it reaches a leaf requiring grad that is not listed, since its gradient
//   would otherwise be lost silently.
// - preserve_rng_state: the default cpu generator's state (and the input's cuda device generator's, for a
//   cuda input) is saved before the forward and replayed for the recomputation, so dropout draws the same
//   mask; the caller's generator state is put back afterwards, so the caller's stream of random numbers is
//   the same as without checkpointing. Without it the recomputation draws new numbers from the caller's
//   stream. Meta inputs (shapes only) draw nothing, so no state is kept for them.
// - With grad mode off, or when neither `input` nor any of `params` requires grad, `segment` simply runs
//   once under no-grad and nothing is kept.
//
// - Autocast: the forward's autocast (nn/autocast/autocast.h: cpu, cuda, meta) is replayed for the recomputation,
//   as PyTorch's checkpoint does, so the recomputed segment casts and saves what the forward would have.
//
// Not supported: create_graph=true through a checkpoint (higher-order gradients). The recomputation starts
// from a detached input, so terms through it would be lost; the backward throws instead.
//
// Error policy: misuse (an undefined input or output, a missing parameter, create_graph) throws c10::Error
// through TORCH_CHECK, from Checkpoint or from the backward call. Whatever `segment` throws propagates the
// same way; the caller's generator state is restored first.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace oomguard {

// Maps one activation tensor to the next; may use parameters it captures (list them in Checkpoint's params).
// It must compute its output the same way each time it is called with the same values.
using Segment = std::function<at::Tensor(const at::Tensor&)>;

// Runs `segment` on `input`, keeping only `input` for the backward, which runs `segment` again with grad
// enabled and routes gradients to `input` and `params`. Copies `segment` (it is called again later, after
// the caller may have returned: capture by value, never the caller's locals by reference).
at::Tensor Checkpoint(const Segment& segment, const at::Tensor& input, const std::vector<at::Tensor>& params,
                      bool preserve_rng_state);

// True on the thread that is recomputing a segment checkpointed without preserve_rng_state (on any
// device, meta included, where no state is kept either way): a random op run now draws numbers the
// forward did not (diagnose/run_observer.h counts them).
bool RecomputingWithoutRngState();
// Told on the recomputing thread as the outermost such recomputation begins (true) and ends (false),
// so an observer can watch operators only then (diagnose/run_observer.h). One listener at a time;
// nullptr: none. Set it where no recomputation runs.
using UnseededRecomputationListener = void (*)(bool begins);
void SetUnseededRecomputationListener(UnseededRecomputationListener listener);

}  // namespace oomguard
