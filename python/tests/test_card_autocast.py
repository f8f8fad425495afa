"""Python.CardAutocastMatchesFakeCuda: mixed precision in card mode casts as PyTorch's AutocastCUDA does
(Note [AutocastCUDA on meta], nn/autocast/meta_autocast.cpp; issue #33).

Independent of oomguard's table: a second process that never loads oomguard runs each model's forward
and loss on PyTorch's own fake CUDA tensors (FakeTensorMode, no GPU) with AutocastCUDA on, entered as
torch.autocast.__enter__ does it (torch.autocast("cuda") itself disables itself without a GPU), and
records what autograd saves (saved_tensors_hooks: the dtype and shape of each saved tensor, in order),
each module's output and the loss. Card mode (oomguard.measure(backend="meta", kernels="cuda") with
m.autocast) must record the same, for bf16 and fp16, on:
- the catalog's autocast scenario's MLP (scenarios/autocast-bf16.json: linear, GELU, layer_norm,
  linear, tanh, linear; cross entropy), at its batch;
- a transformer block as the catalog's (embedding, pre-norm causal attention with softmax, GELU MLP,
  layer_norm, head; cross entropy over tokens).
The bytes each difference from the cpu's autocast costs are counted in tests/card_autocast_test.cpp;
here the bytes card mode saves must exceed those saved under the cpu's table by exactly the sum of the
differences named there, at these shapes.
"""
import contextlib
import math
import os
import pickle
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


class Block(nn.Module):
    """nn/layers/layers_blocks.cpp's transformer_block between an embedding and a head, as the scenario's."""

    def __init__(self, vocab=1000, dim=128, heads=4, hidden=512):
        super().__init__()
        self.heads = heads
        self.embedding = nn.Embedding(vocab, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.ln2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        x = self.embedding(ids)
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, hd).unbind(2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)).mul(1.0 / math.sqrt(hd))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        attention = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
        x = x + self.out(torch.matmul(attention, v).transpose(1, 2).reshape(b, t, d))
        x = x + self.down(F.gelu(self.up(self.ln2(x))))
        return self.head(self.ln(x))


def mlp():
    return nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.LayerNorm(512), nn.Linear(512, 512), nn.Tanh(),
                         nn.Linear(512, 10))


# name -> (make the model, make (input, target) on a device)
MODELS = {
    "mlp": (mlp, lambda d: (torch.empty(512, 256, device=d), torch.zeros(512, dtype=torch.long, device=d))),
    "transformer": (Block, lambda d: (torch.zeros(4, 128, dtype=torch.long, device=d),
                                      torch.zeros(4, 128, dtype=torch.long, device=d))),
}


def spec(t):
    return (t.dtype, tuple(t.shape))


def forward_record(name, device, autocast):
    """The model's forward and loss on `device` under `autocast`: (saved tensors, module outputs, loss, the
    bytes of the distinct storages saved)."""
    make, data = MODELS[name]
    with torch.device(device):
        model = make()
    x, target = data(device)
    outputs = []
    for module in model.modules():
        if not list(module.children()):
            module.register_forward_hook(lambda mod, args, out: outputs.append((type(mod).__name__, spec(out))))
    saved, storages = [], {}

    def pack(t):
        saved.append(spec(t))
        storages[t.untyped_storage()._cdata] = t.untyped_storage().nbytes()
        return t

    with autocast, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    return saved, outputs, spec(loss), sum(storages.values())


@contextlib.contextmanager
def autocast_cuda(dtype):
    """AutocastCUDA on, as torch.autocast("cuda").__enter__/__exit__ set it (torch/amp/autocast_mode.py),
    without its check for a GPU."""
    previous = (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"), torch.is_autocast_cache_enabled())
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", dtype)
    torch.autocast_increment_nesting()
    torch.set_autocast_cache_enabled(True)
    try:
        yield
    finally:
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        torch.set_autocast_enabled("cuda", previous[0])
        torch.set_autocast_dtype("cuda", previous[1])
        torch.set_autocast_cache_enabled(previous[2])


if __name__ == "__main__" and sys.argv[1:] == ["--fake"]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    records = {}
    for name in MODELS:
        for dtype in DTYPES:
            with FakeTensorMode():
                records[(name, dtype)] = forward_record(name, "cuda", autocast_cuda(DTYPES[dtype]))
    pickle.dump(records, sys.stdout.buffer)
    raise SystemExit(0)

# ---------------------------------------------------------------------------------------------------
# The card side.

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])
import oomguard  # noqa: E402
from checks import Checks  # noqa: E402

torch.set_num_threads(1)
check = Checks()


def card_record(name, dtype, kernels):
    with oomguard.measure(backend="meta", kernels=kernels, card="t4") as m:
        with m.autocast(DTYPES[dtype]) as table:
            check(f"{name} {dtype} kernels={kernels}: the table m.autocast casts by", table, kernels)
        return forward_record(name, m.device, m.autocast(DTYPES[dtype]))


fake = subprocess.run([sys.executable, os.path.abspath(__file__), "--fake"], capture_output=True, check=False)
if fake.returncode != 0:
    print(fake.stderr.decode())
    raise SystemExit(1)
fake_records = pickle.loads(fake.stdout)


for (name, dtype), (fake_saved, fake_outputs, fake_loss, fake_bytes) in fake_records.items():
    saved, outputs, loss, saved_bytes = card_record(name, dtype, "cuda")
    for i, (a, b) in enumerate(zip(saved, fake_saved)):
        if a != b:
            print(f"  first saved tensor that differs, #{i}: card {a}, fake CUDA {b}")
            break
    check(f"{name} {dtype}: saved tensors (card mode == fake CUDA under AutocastCUDA)", saved, fake_saved)
    check(f"{name} {dtype}: module outputs", outputs, fake_outputs)
    check(f"{name} {dtype}: loss", loss, fake_loss)
    check(f"{name} {dtype}: bytes of the distinct storages saved", saved_bytes, fake_bytes)

# The cpu table's saved bytes (distinct storages) against the card's, bf16 (tests/card_autocast_test.cpp
# counts each difference):
# - layer_norm, fp32 on CUDA only: a fp32 copy of its bf16 input is saved instead of the input (rows x dim
#   x 2 bytes more); on the transformer every layer_norm's input is fp32 already (embedding, residuals);
# - cross entropy, fp32 on the cpu's table only: CUDA's keeps bf16 log-probabilities besides nll_loss's
#   fp32 copy (rows x classes x 2 more);
# - softmax, fp32 on CUDA only: the attention probabilities in fp32 for softmax's backward, and a bf16 copy
#   for the matmul's, where cpu's saves one bf16 tensor for both (batch x heads x tokens^2 x 4 more).
rows, tokens = 512, 4 * 128
extra = {"mlp": rows * 512 * 2 + rows * 10 * 2, "transformer": tokens * 1000 * 2 + 4 * 4 * 128 * 128 * 4}
for name, want in extra.items():
    card_saved = card_record(name, "bfloat16", "cuda")[3]
    cpu_saved = card_record(name, "bfloat16", "cpu")[3]
    check(f"{name} bf16: saved bytes card - cpu table", card_saved - cpu_saved, want)
raise SystemExit(check.exit_code())
