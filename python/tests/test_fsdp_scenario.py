"""Python.FsdpScenarioMatchesPyTorchsFullyShard: a scenario with `"parallel": {"strategy": "fsdp"}`
(workload/parallel/fully_sharded.h, Note [One FSDP2 rank]) against PyTorch's own FSDP2 (`fully_shard` on each
Linear, then on the model) under oomguard.measure(world=N, rank=r), per rank at world 2 and 4, on cpu;
and the same with activation checkpointing (`pitfalls.checkpoint.segments` one a layer; in PyTorch
fully_shard(checkpoint_wrapper(layer)), non-reentrant: Note [Checkpointing an FSDP2 unit]), whose
backward peak equals, to the byte, the other recipe's: checkpoint(layer, x) around a fully_shard-ed layer.

Usage: test_fsdp_scenario.py OOMGUARD_CLI. The same MLP (256 -> 512 -> relu -> 512 -> 10: the last
layer's 10 rows pad to 12 at world 4), batch, mean loss and Adam, two iterations, in the loop order
of the catalog (zero_grad, transfer, forward, backward, optimizer).

Exact: the rank's parameters, gradients and optimizer state (Python Adam's `step` tensors are host
memory, out of the numbers: Note [The Python optimizer's step counts]). Within 2%: the peak and each
phase's peak, the difference printed: what FSDP2 adds in Python (DeviceMesh's host tensor, DTensor
bookkeeping) is in it. Checkpointed, oomguard's backward peaks about 51.5 KB (1.0-1.3%) over PyTorch's:
its Checkpoint recomputes as the reentrant variant does (nn/checkpoint.cpp), holding the recomputed
segment's output (here 32 x 512 floats, 65536 bytes) while differentiating it, where the non-reentrant
checkpoint under FSDP2 keeps only the recomputed saved tensors; its forward keeps 10.2 KB less
(PyTorch's non-reentrant frames).

Mixed precision (variants mp_*, Note [FSDP2 mixed precision]): `"param_dtype": "bfloat16",
"reduce_dtype": "float32"` against fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16,
reduce_dtype=torch.float32)) on every unit and the root. Exact: the float32 shards, sharded gradients
and Adam state (4/N, 4/N, 8/N bytes an element, plus padding). Forward and optimizer within 2% (PyTorch
+96 and +1120 bytes at world 2, +120 and +632 at world 4). Backward, and so the peak, is PyTorch's
higher by one item: foreach_reduce's copy-in, torch._chunk_cat(bf16 gradients, out=float32 input),
on cpu goes through cat's structured out= wrapper, which first computes into a temporary of the
gradients' dtype ([world, 65536] bf16 for the 512 x 512 weight: 524288 bytes) and then copies it into
the float32 input. CUDA's chunk_cat kernel casts as it copies, and oomguard keeps that card's bytes on
cpu and meta alike (fsdp_storage.h, ChunkCatCasting). At world 4 PyTorch is +523768 bytes (the
temporary, less 520); at world 2 +293344 (the temporary lands 293344 bytes above oomguard's own peak,
which is elsewhere). The test checks each such difference is at least 0 and at most CAT_TEMPORARY,
the largest unit's bf16 gradients, and prints it.

Autocast under that policy (variants ac_*: `"loop": {"autocast": "bfloat16", "loss": "mse"}` beside
mpmse_*, the same without autocast) against the same fully_shard under torch.autocast("cpu", bfloat16)
around the forward and the loss. The gathered parameters and FSDP2's cast input are bf16 already, so
autocast casts nothing for the linears; mse_loss is on AutocastCPU's fp32 list, so it casts the bf16
output and its zeros to float32 and reduces there. Checked as mp_* above (exact shards, gradients and
state; forward and optimizer within 2%; backward and the peak over by at most cpu cat's temporary), and
exactly: what autocast adds, ac_* less mpmse_*, in every phase's peak and the peak, equals PyTorch's to
the byte (what FSDP2 adds in Python, and the cat's temporary, is in both and cancels): +642 bytes on
backward's peak and the peak, +0 on forward's and the optimizer's, at world 2 and 4 alike. The C++
side, every real rank against meta's, is RealRanks.AutocastUnderFsdpsMixedPrecision... (Note [Autocast
under FSDP2's policy], workload/parallel/fully_sharded.h).
"""
import contextlib
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import checkpoint

import oomguard
from checks import Checks

torch.set_num_threads(1)

LAYERS = [{"kind": "linear", "in": 256, "out": 512}, {"kind": "relu"}, {"kind": "linear", "in": 512, "out": 512},
          {"kind": "relu"}, {"kind": "linear", "in": 512, "out": 10}]
BATCH, FEATURES, ITERATIONS = 32, 256, 2
WORLDS = (2, 4)
TOLERANCE = 0.02
MIXED = {"param_dtype": "bfloat16", "reduce_dtype": "float32"}  # Note [FSDP2 mixed precision]
MSE = {"loss": "mse"}  # the C++ loop's mse: mse_loss(output, zeros_like(output)), on AutocastCPU's fp32 list
CAT_TEMPORARY = 2 * 512 * (512 + 1)  # the cpu cat's bf16 temporary, at most the largest unit's gradients


def policy(mixed):
    if not mixed:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def scenario():
    variants = {f"w{w}r{r}": {"parallel": {"world": w, "rank": r}} for w in WORLDS for r in range(w)}
    variants.update({f"ckpt_w{w}r{r}": {"parallel": {"world": w, "rank": r},
                                        "pitfalls": {"checkpoint": {"segments": len(LAYERS)}}}
                     for w in WORLDS for r in range(w)})
    variants.update({f"mp_w{w}r{r}": {"parallel": {"world": w, "rank": r, **MIXED}} for w in WORLDS for r in range(w)})
    for prefix, loop in (("mpmse", MSE), ("ac", {**MSE, "autocast": "bfloat16"})):
        variants.update({f"{prefix}_w{w}r{r}": {"parallel": {"world": w, "rank": r, **MIXED}, "loop": loop}
                         for w in WORLDS for r in range(w)})
    return {"name": "fsdp-mlp", "summary": "an MLP under FSDP2, one rank", "backends": ["cpu"], "cap": "1GiB",
            "model": {"layers": LAYERS}, "data": {"batch": BATCH, "shape": [FEATURES]},
            "loop": {"iterations": ITERATIONS, "loss": "mean", "optimizer": {"kind": "adam", "lr": 0.001}},
            "parallel": {"strategy": "fsdp", "world": 2}, "variants": variants}


def catalog(cli):
    """{variant: measurement} from `oomguard run` on the scenario above."""
    with tempfile.TemporaryDirectory() as tmp:
        path, out = os.path.join(tmp, "fsdp-mlp.json"), os.path.join(tmp, "run.json")
        with open(path, "w") as f:
            json.dump(scenario(), f)
        subprocess.run([cli, "run", path, "--backend", "cpu", "--json", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            variants = json.load(f)["scenarios"][0]["variants"]
    return {v["measurement"]["variant"]: v["measurement"] for v in variants}


def padding_bytes(world, rank):
    """The float32 bytes of the rows FSDP2 pads each parameter's shard with on `rank` (dim 0 chunked)."""
    padded = 0
    for layer in LAYERS:
        if layer["kind"] != "linear":
            continue
        rows, chunk = layer["out"], -(-layer["out"] // world)
        mine = max(0, min(chunk, rows - rank * chunk))
        padded += (chunk - mine) * (layer["in"] + 1)  # the weight's rows and the bias's
    return 4 * padded


class Checkpointed(nn.Module):
    """The other recipe: checkpoint(layer, x) around a layer fully_shard was applied to, so FSDP2's hooks
    run inside the checkpoint, and again (returning at once, in PRE_BACKWARD) in the recomputation."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)


def model_checkpoint_inside():
    modules = []
    for layer in LAYERS:
        m = nn.Linear(layer["in"], layer["out"]) if layer["kind"] == "linear" else nn.ReLU()
        if isinstance(m, nn.Linear):
            fully_shard(m)
        modules.append(Checkpointed(m))
    net = nn.Sequential(*modules)
    fully_shard(net)
    return net


def model(checkpointed, mixed=False):
    modules = []
    for layer in LAYERS:
        m = nn.Linear(layer["in"], layer["out"]) if layer["kind"] == "linear" else nn.ReLU()
        modules.append(checkpoint_wrapper(m) if checkpointed else m)  # non-reentrant, RNG state preserved
    net = nn.Sequential(*modules)
    for m in net:
        if any(isinstance(sub, nn.Linear) for sub in m.modules()):
            fully_shard(m, mp_policy=policy(mixed))
    fully_shard(net, mp_policy=policy(mixed))
    return net


def step(net, m, mse=False, autocast=False):
    """One micro-batch: the batch, output and loss die on return, before the step, as in the C++ loop
    (whose output lives through backward: mse's is kept here as well). Autocast wraps the forward and the
    loss, as loop.autocast does."""
    with m.phase("transfer"):
        x = torch.randn(BATCH, FEATURES)
    with m.phase("forward"), (m.autocast(torch.bfloat16) if autocast else contextlib.nullcontext()):
        if mse:
            out = net(x)
            loss = F.mse_loss(out, torch.zeros_like(out))
        else:
            loss = net(x).mean()
    with m.phase("backward"):
        loss.backward()


def measured(world, rank, checkpointed=False, make=None, mixed=False, mse=False, autocast=False):
    with oomguard.measure(backend="cpu", cap="1GiB", world=world, rank=rank) as m:
        net = make() if make else model(checkpointed, mixed)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        m.track(net, opt)
        for _ in m.iterations(ITERATIONS):
            with m.phase("zero_grad"):
                opt.zero_grad()
            step(net, m, mse, autocast)
            with m.phase("optimizer"):
                opt.step()
    del opt, net
    return m.result


def main():
    check = Checks()
    cpp = catalog(sys.argv[1])
    measured(2, 0)  # the process's first FSDP step makes FSDP's one-time state (python/tests/test_ranks.py)
    worst = 0.0
    runs = [(w, r, kind) for kind in ("", "ckpt", "mp", "mpmse", "ac") for w in WORLDS for r in range(w)]
    peaks = {}  # {name: {what: (python, oomguard)}}, for what autocast adds
    for world, rank, kind in runs:
        name = f"{kind + '_' if kind else ''}w{world}r{rank}"
        checkpointed, mixed = kind == "ckpt", kind in ("mp", "mpmse", "ac")
        c = cpp[name]
        r = measured(world, rank, checkpointed, mixed=mixed, mse=kind in ("mpmse", "ac"), autocast=kind == "ac")
        check(f"{name}: outcome", r.outcome, "pass")
        # Python counts a DTensor's local tensor, the rank's rows; oomguard its padded shard's storage.
        padding = padding_bytes(world, rank)
        check(f"{name}: parameters + padding", r.breakdown["parameters"] + padding, c["param_bytes"])
        check(f"{name}: gradients + padding", r.breakdown["gradients"] + padding, c["grad_bytes"])
        check(f"{name}: optimizer state", r.breakdown["optimizer_state"], c["optimizer_state_bytes"])
        phases = {p["phase"]: p["peak_bytes"] for p in c["phase_peaks"]}
        rows = [("peak", r.peak_bytes, c["peak_bytes"])]
        rows += [(phase, r.phase_peak_bytes.get(phase, 0), phases[phase])
                 for phase in ("forward", "backward", "optimizer") if phase in phases]
        if checkpointed:  # Note [Checkpointing an FSDP2 unit]: both recipes hold the same bytes in backward
            inside = measured(world, rank, make=model_checkpoint_inside).phase_peak_bytes["backward"]
            wrapped = r.phase_peak_bytes["backward"]
            print(f"{name} backward: checkpoint(fully_shard(layer)) {inside}, fully_shard(checkpoint_wrapper(layer)) "
                  f"{wrapped}, difference {inside - wrapped:+d}")
            check(f"{name}: checkpoint(fully_shard(layer))'s backward peak", inside, wrapped)
        peaks[name] = {what: (python, ours) for what, python, ours in rows}
        if kind == "ac":  # what autocast adds under FSDP2's policy: PyTorch's to the byte (docstring)
            for what, (python, ours) in peaks[name].items():
                plain_python, plain_ours = peaks[f"mpmse_w{world}r{rank}"][what]
                print(f"{name} {what}: autocast adds {python - plain_python:+d} in PyTorch FSDP2, "
                      f"{ours - plain_ours:+d} in oomguard")
                check(f"{name}: what autocast adds to {what}", ours - plain_ours, python - plain_python)
        for what, python, ours in rows:
            if mixed and what in ("peak", "backward"):  # the itemised temporary (docstring)
                print(f"{name} {what}: PyTorch FSDP2 {python}, oomguard {ours}, difference {python - ours:+d} "
                      f"(cpu cat's temporary, at most {CAT_TEMPORARY})")
                check(f"{name}: {what} differs by cpu cat's temporary", 0 <= python - ours <= CAT_TEMPORARY, True)
                continue
            relative = abs(python - ours) / ours
            worst = max(worst, relative)
            print(f"{name} {what}: PyTorch FSDP2 {python}, oomguard {ours}, difference {python - ours:+d} "
                  f"({100 * relative:.3f}%)")
            check(f"{name}: {what} within {100 * TOLERANCE:.0f}%", relative <= TOLERANCE, True)
    print(f"largest difference: {100 * worst:.3f}%")
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
