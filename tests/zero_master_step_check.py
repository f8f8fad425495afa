"""The independent check of a zero rank's master-weights step (Note [Master weights],
workload/loop/master_weights.h): DeepSpeed's stage_1_and_2.py step() (38327e0, 1886-1920), its
statements run in eager PyTorch on cpu and its allocations read from the profiler, peaks over the
step's end as `oomguard run` on meta measures it (the optimizer phase's peak less the second
iteration's end).

Usage: zero_master_step_check.py OOMGUARD

The rank: zero2, rank 1 of 2 of a bf16 MLP (64 -> 128 -> 64 -> 3), SGD with momentum 0.9 (no
temporaries of its own), the momentum buffer already there (the second step). Its partition and
padding come from DeepSpeed's rule (align_dense_tensors to 2 x world, get_data_parallel_partitions);
its 16-bit gradients are oomguard's zero2 shard of S elements (Note [One simulated rank],
workload/parallel/data_parallel.h), made inside the profile so that its free is seen. Exits 1 when the
two differ.
"""

import json
import os
import subprocess
import sys
import tempfile

import torch
from torch._utils import _flatten_dense_tensors as flatten
from torch.profiler import ProfilerActivity, profile

LAYERS = [(64, 128), (128, 64), (64, 3)]  # linear (in, out): a weight [out, in] and a bias [out]
WORLD, RANK = 2, 1
SCENARIO = {
    "name": "zero-master-step", "summary": "zero2 with master weights, rank 1 of 2", "backends": ["meta"],
    "model": {"dtype": "bfloat16", "layers": [{"kind": "linear", "in": 64, "out": 128}, {"kind": "relu"},
                                              {"kind": "linear", "in": 128, "out": 64},
                                              {"kind": "linear", "in": 64, "out": 3}]},
    "data": {"batch": 8, "shape": [64], "dtype": "bfloat16"},
    "loop": {"iterations": 2, "loss": "mse",
             "optimizer": {"kind": "sgd", "momentum": 0.9, "master_weights": True}},
    "parallel": {"world": WORLD, "strategy": "zero2", "rank": RANK}, "variants": {"r": {}}}


def partition():
    """DeepSpeed's S and the sizes of rank RANK's pieces (one a parameter it crosses, then padding)."""
    sizes = [n for i, o in LAYERS for n in (o * i, o)]
    total = sum(sizes)
    alignment = 2 * WORLD  # nccl_start_alignment_factor x world
    padded = total + (alignment - total % alignment) % alignment  # align_dense_tensors
    s = padded // WORLD  # get_data_parallel_partitions: no remainder
    begin, end, at, pieces = RANK * s, (RANK + 1) * s, 0, []
    for n in sizes:
        lo, hi = max(at, begin), min(at + n, end)
        if lo < hi:
            pieces.append(hi - lo)
        at += n
    return s, pieces, s - sum(pieces)


def eager_step_peak_over_end():
    s, pieces, pad = partition()
    master = torch.zeros(s, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.SGD([master], lr=0.1, momentum=0.9)
    master.grad = torch.zeros(s)
    opt.step()  # the momentum buffer, as at the second step
    master.grad = None
    bit16 = torch.zeros(s, dtype=torch.bfloat16)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        shard = torch.zeros(s, dtype=torch.bfloat16)  # the rank's 16-bit gradients, the padding's at its tail
        averaged, at = [], 0
        for n in pieces + ([pad] if pad else []):
            averaged.append(shard.narrow(0, at, n))
            at += n
        grad = flatten(averaged).to(master.dtype)  # 1892-1897: the flat copy freed at the statement's end
        master.grad = grad
        del averaged, shard  # 1904, 1906
        opt.step()
        master.grad = None  # 1916
        del grad
        bit16.data.copy_(master.data)  # 1920
    # An allocation is on the innermost op that made it (self_cpu_memory_usage), a free outside any op
    # on a "[memory]" event: walked in time order they are the live bytes.
    live = peak = 0
    for e in sorted((e for e in prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.start):
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    return peak - live, s


def main():
    oomguard = sys.argv[1]
    with tempfile.TemporaryDirectory() as scratch:
        scenario, results = os.path.join(scratch, "s.json"), os.path.join(scratch, "r.json")
        with open(scenario, "w") as f:
            json.dump(SCENARIO, f)
        subprocess.run([oomguard, "run", scenario, "--backend", "meta", "--json", results], check=True,
                       stdout=subprocess.DEVNULL)
        with open(results) as f:
            m = json.load(f)["scenarios"][0]["variants"][0]["measurement"]
    optimizer = next(p["peak_bytes"] for p in m["phase_peaks"] if p["phase"] == "optimizer")
    ours = optimizer - m["iterations"][-1]["live_after_bytes"]
    eager, s = eager_step_peak_over_end()
    print(f"S = {s}: the step's peak over its end, eager DeepSpeed {eager} bytes, oomguard {ours} (8 S = {8 * s})")
    if eager != ours:
        print("FAIL: the two differ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
