"""The independent check of a zero rank's gradients between backward and the step (Note [Gradients
between backward and step], workload/parallel/data_parallel.h) and of its master-weights step (Note
[Master weights], workload/loop/master_weights.h): DeepSpeed's stage_1_and_2.py (38327e0) statements,
from the end of backward (reduce_ipg_grads' copy_grads_in_partition, 1344-1360, and
independent_gradient_partition_epilogue, 783-807) through step() (1886-1920), run in eager PyTorch on
cpu with their allocations read from the profiler, against `oomguard run` on meta: the bytes held when
backward ends (the measurement's grad_bytes) and the step's peak over its end (the optimizer phase's
peak less the second iteration's end), for zero1 and zero2 (DeepSpeed's two stages end backward alike).

Usage: zero_master_step_check.py OOMGUARD

The rank: rank 1 of 2 of a bf16 MLP (64 -> 128 -> 64 -> 3), SGD with momentum 0.9 (no temporaries of
its own), the momentum buffer already there (the second step). Its partition and padding come from
DeepSpeed's rule (align_dense_tensors to 2 x world, get_data_parallel_partitions, get_partition_info).
Exits 1 when the two differ.
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
    """DeepSpeed's S, rank RANK's params_in_partition (their sizes, whole), first_offset and padding."""
    sizes = [n for i, o in LAYERS for n in (o * i, o)]
    total = sum(sizes)
    alignment = 2 * WORLD  # nccl_start_alignment_factor x world
    padded = total + (alignment - total % alignment) % alignment  # align_dense_tensors
    s = padded // WORLD  # get_data_parallel_partitions: no remainder
    begin, end, at, crossed, first_offset = RANK * s, (RANK + 1) * s, 0, [], 0
    for n in sizes:  # get_partition_info, 1617-1634
        if begin <= at < end:
            crossed.append(n)
        elif at < begin < at + n:
            crossed.append(n)
            first_offset = begin - at
        at += n
    return s, crossed, first_offset


def live_bytes(prof):
    """The live bytes at the profile's end over its start, and its peak over its end. An allocation is on
    the innermost op that made it (self_cpu_memory_usage), a free outside any op on a "[memory]" event:
    walked in time order they are the live bytes."""
    live = peak = 0
    for e in sorted((e for e in prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.start):
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    return live, peak - live


def get_flat_partition(grads, first_offset, partition_size):
    """1723-1761, return_tensor_list=True: views of the gradients, then zeros for the padding."""
    flat, current = [], 0
    for i, tensor in enumerate(grads):
        num, offset = tensor.numel(), 0
        if i == 0 and first_offset > 0:
            offset = first_offset
            num -= offset
        num = min(num, partition_size - current)
        if offset > 0 or num < tensor.numel():
            flat.append(tensor.contiguous().view(-1).narrow(0, offset, num))
        else:
            flat.append(tensor)
        current += num
    if current < partition_size:
        flat.append(torch.zeros(partition_size - current, dtype=torch.bfloat16))
    return flat


def eager_deepspeed():
    """(bytes held between backward and the step, the step's peak over its end, S)."""
    s, crossed, first_offset = partition()
    params = [torch.zeros(n, dtype=torch.bfloat16, requires_grad=True) for n in crossed]
    master = torch.zeros(s, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.SGD([master], lr=0.1, momentum=0.9)
    master.grad = torch.zeros(s)
    opt.step()  # the momentum buffer, as at the second step
    master.grad = None
    bit16 = torch.zeros(s, dtype=torch.bfloat16)
    reduced = [torch.zeros(n, dtype=torch.bfloat16) for n in crossed]  # the reduced ipg bucket's parts
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as backward_end:
        grads_in_partition = torch.empty(sum(crossed), dtype=torch.bfloat16)  # 1352-1354
        offset = 0
        for p, grad in zip(params, reduced):  # copy_grads_in_partition, 1359-1362
            p.grad = grads_in_partition.narrow(0, offset, p.numel())
            p.grad.copy_(grad)
            offset += p.numel()
        averaged = get_flat_partition([p.grad for p in params], first_offset, s)  # 783-790
        grads_in_partition = None  # _release_ipg_buffers, 676-679
        for p in params:  # zero_grad(set_to_none=True), 807
            p.grad = None
    held, _ = live_bytes(backward_end)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as step:
        grad = flatten(averaged).to(master.dtype)  # 1892-1897: the flat copy freed at the statement's end
        master.grad = grad
        averaged = None  # 1904, 1906
        opt.step()
        master.grad = None  # 1916
        del grad
        bit16.data.copy_(master.data)  # 1920
    # The step frees what backward's end held: its end is `held` under where it started.
    end, over_end = live_bytes(step)
    assert end == -held, (end, held)
    return held, over_end, s


def oomguard_rank(oomguard, strategy):
    """(grad_bytes, the optimizer phase's peak over the second iteration's end) of `oomguard run`."""
    scenario = json.loads(json.dumps(SCENARIO))
    scenario["parallel"]["strategy"] = strategy
    with tempfile.TemporaryDirectory() as scratch:
        path, results = os.path.join(scratch, "s.json"), os.path.join(scratch, "r.json")
        with open(path, "w") as f:
            json.dump(scenario, f)
        subprocess.run([oomguard, "run", path, "--backend", "meta", "--json", results], check=True,
                       stdout=subprocess.DEVNULL)
        with open(results) as f:
            m = json.load(f)["scenarios"][0]["variants"][0]["measurement"]
    optimizer = next(p["peak_bytes"] for p in m["phase_peaks"] if p["phase"] == "optimizer")
    return m["grad_bytes"], optimizer - m["iterations"][-1]["live_after_bytes"]


def main():
    held, over_end, s = eager_deepspeed()
    failed = False
    for strategy in ("zero1", "zero2"):
        grads, ours = oomguard_rank(sys.argv[1], strategy)
        print(f"{strategy}, S = {s}: held between backward and the step, eager DeepSpeed {held} bytes, "
              f"oomguard {grads}; the step's peak over its end, eager DeepSpeed {over_end}, oomguard {ours}")
        if (held, over_end) != (grads, ours):
            print(f"FAIL: {strategy}: the two differ")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
