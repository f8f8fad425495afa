"""The Python package's ranks on a GPU (issue #34; Note [One rank in one process], python/oomguard/ranks.py):
one rank of a small FSDP2 run and of a DDP one, at world 2 and 4, in PyTorch's fake process group, measured
by oomguard.measure on backend="cuda" (the fake group on the real GPU: one process is any rank), on meta in
card mode (kernels="cuda") and on cpu. Each measurement runs in a process of its own (a process's first
FSDP step makes one-time state: python/tests/test_ranks.py), so the three backends start alike.

    python3 ci/gpu_python_ranks.py MODEL WORLD BACKEND   # one measurement: prints its numbers as JSON
    gpu_python_check.py calls table() for the rows and the differences past 1% against cuda.

The models are python/tests/test_ranks.py's: four Linear(256, 256); "fsdp" shards each and the whole
(fully_shard) and steps Adam, as its sharded_step; "ddp" wraps them in DistributedDataParallel (buckets
copied beside the gradients, PyTorch's default) and steps SGD, as its ddp_step. Two iterations, batch 8.
"""
import json
import os
import sys

from gpu_children import differences, measure_each, run_child

MODELS, WORLDS = ("fsdp", "ddp"), (2, 4)
GPU_CARD = os.environ.get("OOMGUARD_GPU_CARD", "h200")  # the preset whose compute capability the GPU has
BACKENDS = {"cpu": dict(card="t4", backend="cpu"),
            "meta-card": dict(card=GPU_CARD, backend="meta", kernels="cuda"),
            "cuda": dict(card="t4", backend="cuda")}
WIDTH, LAYERS, BATCH = 256, 4, 8
TOLERANCE = 0.01  # differences past 1% of cuda's number are listed
CHILD_TIMEOUT_S = 50  # four cuda children one after another fit the step's 240 s


def measure_one(model_kind, world, backend):
    """One rank (rank 0) measured in this process: its numbers as a dict."""
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])
    import torch
    from torch import nn
    import oomguard
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "tests"))
    from checks import train_sum  # the tests' step: two iterations of model(x).sum(), each phase marked
    torch.set_num_threads(1)
    with oomguard.measure(world=world, **BACKENDS[backend]) as m:
        torch.manual_seed(0)
        with torch.device(m.device):
            model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
        if model_kind == "fsdp":
            from torch.distributed.fsdp import fully_shard
            for layer in model:
                fully_shard(layer)
            fully_shard(model)
            optimizer = torch.optim.Adam(model.parameters())
        else:
            from torch.nn.parallel import DistributedDataParallel
            model = DistributedDataParallel(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        train_sum(m, model, optimizer, torch.randn(BATCH, WIDTH, device=m.device))
    r = m.result
    stats = r.cuda if r.cuda is not None else r.cuda_model
    return {"outcome": r.outcome, "peak": r.peak_bytes, "phase_peaks": dict(r.phase_peak_bytes),
            "allocated_peak": stats.allocated_peak_bytes if stats is not None else None,
            "reserved_peak": stats.reserved_peak_bytes if stats is not None else None,
            "rank": f"{r.rank} of {r.world} ({r.process_group})"}


def measure_all():
    """Every (model, world, backend), each in a fresh process: cpu and meta beside each other, cuda one at a time."""
    keys = [(m, w, b) for m in MODELS for w in WORLDS for b in BACKENDS]
    return keys, measure_each(keys, lambda m, w, b: run_child(__file__, [m, w, b], CHILD_TIMEOUT_S),
                              lambda k: k[2] == "cuda")


def table():
    """(Markdown lines, whether every cuda measurement ran)."""
    keys, results = measure_all()
    lines = ["| model | world | backend | rank | outcome | ledger peak | allocated peak | reserved peak | phase peaks |",
             "|---|---|---|---|---|---|---|---|---|"]
    cuda_ran = True
    for m, w, b in keys:
        r = results[(m, w, b)]
        if "error" in r:
            lines.append(f"| {m} | {w} | {b} | | error: {r['error']} | | | | |")
            cuda_ran = cuda_ran and b != "cuda"
            continue
        phases = ", ".join(f"{p} {v}" for p, v in sorted(r["phase_peaks"].items()))
        lines.append(f"| {m} | {w} | {b} | {r['rank']} | {r['outcome']} | {r['peak']} | {r['allocated_peak']} | "
                     f"{r['reserved_peak']} | {phases} |")
    lines += ["", f"Differences past {TOLERANCE:.0%} of cuda's number (cpu: the allocator model's allocated and "
              "reserved; meta-card: the card's):", ""]
    listed = 0
    for m in MODELS:
        for w in WORLDS:
            cuda = results[(m, w, "cuda")]
            if "error" in cuda:
                lines.append(f"- {m} world {w}: no cuda numbers ({cuda['error'][:120]})")
                continue
            for b in ("cpu", "meta-card"):
                other = results[(m, w, b)]
                found = differences(f"{m} world {w}, {b}", cuda, other, TOLERANCE)
                lines += found
                listed += len(found)
    if listed == 0 and cuda_ran:
        lines.append("- none")
    return lines, cuda_ran


if __name__ == "__main__":
    print(json.dumps(measure_one(sys.argv[1], int(sys.argv[2]), sys.argv[3])))
