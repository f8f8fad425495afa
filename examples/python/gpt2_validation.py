"""A small Hugging Face GPT-2 (random weights, built from its config) trained on random token ids, with
a validation loss after each step summed for logging.

TorchScript cannot compile this model (torch.jit.script(model) fails: it cannot read the source of the
generated GPT2Config.__init__, and the forward's keyword arguments, optional caches and ModelOutput
dataclass are beyond it too), so the catalog's C++ runner cannot load it; oomguard.measure watches it
where it runs, in Python.

The pitfall: the running total sums loss tensors (total = total + loss). A validation loss computed with
autograd on carries its graph, and since no backward ever runs on it, the graph still holds every
activation its forward saved: each iteration's validation forward stays alive. The fix sums
loss.detach() (or loss.item(), a number; on meta there are no values to read).
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

BATCH, TOKENS, VOCAB = 8, 64, 1000
ITERATIONS = 3


def make_model(device):
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=VOCAB, n_positions=TOKENS,
                        bos_token_id=0, eos_token_id=0)
    with device:
        return GPT2LMHeadModel(config)


def token_ids(device):
    return torch.randint(0, VOCAB, (BATCH, TOKENS), device=device)


def validation_loss(model, ids, detach):
    """The loss on held-out ids, autograd on. detach=False is the pitfall: the loss keeps its graph."""
    loss = model(input_ids=ids, labels=ids).loss
    return loss.detach() if detach else loss


def train(m, detach=True):
    """Trains inside the measurement `m` (an oomguard.measure); returns the summed validation loss."""
    model = make_model(m.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    m.track(model, opt)
    held_out = token_ids(m.device)
    total = 0.0
    for _ in m.iterations(ITERATIONS):
        with m.phase("transfer"):
            ids = token_ids(m.device)
        with m.phase("forward"):
            loss = model(input_ids=ids, labels=ids).loss
        with m.phase("backward"):
            loss.backward()
        with m.phase("optimizer"):
            opt.step()
            opt.zero_grad()
        with m.phase("eval"):
            total = total + validation_loss(model, held_out, detach)
    return total
