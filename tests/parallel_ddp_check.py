"""The independent check of `parallel` ddp (workload/parallel/data_parallel.h): PyTorch's own
DistributedDataParallel, on PyTorch's fake process group, holds the buckets `oomguard run` reports.

Usage: parallel_ddp_check.py OOMGUARD SCENARIO

For each variant of SCENARIO whose strategy is ddp, the model is built as the layer list builds it and
wrapped in DDP (bucket_cap_mb and gradient_as_bucket_view as the variant sets them) on rank 0 of the
variant's world. DDP's default hook cannot run on the fake group (its future carries None:
"expected the hook result is either a Tensor or a TensorList found None"), so a hook returns the
bucket as it is, which allocates nothing. From the second iteration on (the Reducer rebuilds its
buckets then; the first has one bucket of every parameter, the same bytes) the buckets' bytes must
equal the measurement's parallel.bucket_bytes, and with gradient_as_bucket_view every gradient must be
a view of a bucket. Exits 1 with the differences.
"""

import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_eager_check import merged_variant  # noqa: E402  (the scenario's merge patch, as oomguard merges it)


def load_json_with_comments(path):
    """A scenario file whose comments are whole lines (`//` first), as the catalog writes them."""
    with open(path) as f:
        return json.loads("\n".join(line for line in f if not line.lstrip().startswith("//")))


def build(layers):
    modules = []
    for layer in layers:
        for _ in range(layer.get("repeat", 1)):
            if layer["kind"] == "linear":
                modules.append(torch.nn.Linear(layer["in"], layer["out"], bias=layer.get("bias", True)))
            elif layer["kind"] == "gelu":
                modules.append(torch.nn.GELU())
            elif layer["kind"] == "relu":
                modules.append(torch.nn.ReLU())
            else:
                raise SystemExit(f"layer kind {layer['kind']} is not in this check")
    return torch.nn.Sequential(*modules)


def pytorch_buckets(variant):
    parallel = variant["parallel"]
    model = build(variant["model"]["layers"])
    kwargs = {"gradient_as_bucket_view": parallel.get("gradient_as_bucket_view", False)}
    if "bucket_cap_mb" in parallel:
        kwargs["bucket_cap_mb"] = parallel["bucket_cap_mb"]
    ddp = torch.nn.parallel.DistributedDataParallel(model, **kwargs)
    seen = []

    def hook(_, bucket):
        seen.append(bucket.buffer())
        future = torch.futures.Future()
        future.set_result(bucket.buffer())
        return future

    ddp.register_comm_hook(None, hook)
    batch = variant.get("data", {}).get("batch", 1)
    for _ in range(2):
        seen.clear()
        ddp(torch.randn(batch, *variant["data"]["shape"])).pow(2).mean().backward()
    views = all(any(p.grad.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() for b in seen)
                for p in model.parameters())
    return [b.numel() * b.element_size() for b in seen], views


def main():
    oomguard, scenario = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as scratch:
        results = os.path.join(scratch, "r.json")
        subprocess.run([oomguard, "run", scenario, "--backend", "meta", "--json", results], check=True,
                       stdout=subprocess.DEVNULL)
        measured = {v["name"]: v["measurement"] for v in json.load(open(results))["scenarios"][0]["variants"]}
    spec = load_json_with_comments(scenario)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=spec["parallel"]["world"])
    failures, checked = [], 0
    for name, patch in spec["variants"].items():
        variant = merged_variant(spec, name)
        variant["parallel"] = {**spec.get("parallel", {}), **(patch.get("parallel") or {})}  # no nested keys
        if variant["parallel"].get("strategy", "ddp") != "ddp":
            continue
        buckets, views = pytorch_buckets(variant)
        ours = measured[name]["parallel"]["bucket_bytes"]
        checked += 1
        print(f"{name}: PyTorch's DDP buckets {buckets}, oomguard {ours}")
        if buckets != ours:
            failures.append(f"{name}: buckets {buckets} in PyTorch, {ours} in oomguard")
        if variant["parallel"].get("gradient_as_bucket_view", False) and not views:
            failures.append(f"{name}: PyTorch's gradients are not the buckets' views")
    if checked == 0:
        failures.append("no ddp variant in " + scenario)
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
