"""The catalog's forgotten-no-grad scenario (scenarios/forgotten-no-grad.json) as a plain Python loop.

An MLP (256 -> 512 -> 512 -> 10, float32) trained with Adam on batches of 512, two iterations; after
each training step an evaluation of 8 batches keeps its outputs (for metrics). Without torch.no_grad()
every kept output holds its autograd graph, and the graph holds the activations and the input batch
saved for a backward pass that never comes: the pitfall. Each step's tensors die where the catalog's
C++ loop (workload/loop/variant_run.cpp) frees them, so the bytes are the catalog variant's.
"""
import contextlib

import torch
from torch import nn
from torch.nn import functional as F

BATCH, FEATURES, HIDDEN, CLASSES = 512, 256, 512, 10
ITERATIONS, EVAL_BATCHES = 2, 8


def make_model(device):
    torch.manual_seed(1)  # the scenario's seed
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN, device=device), nn.ReLU(),
                         nn.Linear(HIDDEN, HIDDEN, device=device), nn.ReLU(),
                         nn.Linear(HIDDEN, CLASSES, device=device))


def next_batch(device):
    """Inputs and labels drawn on the device: the bytes the catalog's host draw and copy book there."""
    return torch.randn(BATCH, FEATURES, device=device), torch.randint(0, CLASSES, (BATCH,), device=device)


def train_step(model, m):
    """Forward and backward on a fresh batch; the batch, output and loss die on return."""
    with m.phase("transfer"):
        x, y = next_batch(m.device)
    with m.phase("forward"):
        output = model(x)  # alive until the step ends, as the C++ loop's local
        loss = F.cross_entropy(output, y)
    with m.phase("backward"):
        loss.backward()


def predictions(model, device):
    """The model's outputs on fresh batches (their labels would score them); a batch dies with the next."""
    for _ in range(EVAL_BATCHES):
        x, labels = next_batch(device)
        yield model(x)


def evaluate(model, m, no_grad):
    """Keeps every batch's output for metrics. no_grad=False is the pitfall: each output holds its graph."""
    with m.phase("eval"):
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            outputs = list(predictions(model, m.device))
    return outputs  # the caller drops them, as the catalog's loop does


def train(m, no_grad=True):
    """The scenario's loop inside the measurement `m` (an oomguard.measure); returns the optimizer."""
    model = make_model(m.device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    m.track(model, opt)
    for _ in m.iterations(ITERATIONS):
        with m.phase("zero_grad"):
            opt.zero_grad()
        train_step(model, m)
        with m.phase("optimizer"):
            opt.step()
        evaluate(model, m, no_grad)
    return opt
