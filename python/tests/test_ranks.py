"""One rank of a sharded run: oomguard.measure(world=N, rank=r) over PyTorch's own FSDP2 (fully_shard),
in PyTorch's fake process group, and the same step on real gloo ranks (Note [One rank in one process])."""
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

import oomguard
from checks import train_sum

torch.set_num_threads(1)  # one thread: the gloo ranks are forked from this process (GNU OpenMP is not fork-safe)

WIDTH, LAYERS, BATCH = 256, 4, 8
WEIGHT, BIAS = WIDTH * WIDTH * 4, WIDTH * 4  # float32 bytes of one Linear's weight and bias
PARAMETERS = LAYERS * (WEIGHT + BIAS)


def sharded_step(m):
    """Four Linears, each an FSDP2 unit under a root unit, Adam, two iterations, on the measured device."""
    torch.manual_seed(0)
    with torch.device(m.device):
        model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    train_sum(m, model, torch.optim.Adam(model.parameters()), torch.randn(BATCH, WIDTH, device=m.device))


def numbers(result):
    return {"world": result.world, "rank": result.rank, "process_group": result.process_group,
            "outcome": result.outcome, "peak": result.peak_bytes, "phase_peaks": dict(result.phase_peak_bytes),
            "live_after": list(result.live_after_iteration), "breakdown": result.breakdown}


def measured_rank(world, rank, backend="cpu"):
    with oomguard.measure(card="t4", world=world, rank=rank, backend=backend) as m:
        sharded_step(m)
    assert not dist.is_initialized(), "the fake group the measurement made ends with it"
    return m.result


@pytest.mark.parametrize("world", [2, 4])
def test_a_rank_keeps_its_share_of_parameters_gradients_and_adam_state(world):
    # ZeRO-3 (FSDP): each rank holds 1/world of the parameters, of their gradients and of Adam's two
    # moments (the widths divide by the world: no padding); Adam's `step` is one float32 per parameter
    # tensor on the host, left out (Note [The Python optimizer's step counts]).
    result = measured_rank(world, rank=world - 1)
    assert result.outcome == "pass", result.describe()
    assert (result.world, result.rank, result.process_group) == (world, world - 1, "fake")
    assert f"rank {world - 1} of {world} (fake process group)" in result.describe()
    assert result.breakdown["parameters"] == PARAMETERS // world
    assert result.breakdown["gradients"] == PARAMETERS // world
    assert result.breakdown["optimizer_state"] == 2 * PARAMETERS // world


def test_every_rank_of_the_fake_group_measures_alike_and_shards_shrink_the_live_bytes():
    # The process's first FSDP step makes what FSDP makes once per process (14 allocations more; 16 bytes
    # of them stay alive, and later measurements book them as live from their start): after it, every
    # rank is alike.
    measured_rank(4, 0)
    ranks = [numbers(measured_rank(4, rank)) for rank in range(4)]
    for r in ranks[1:]:
        assert {k: v for k, v in r.items() if k != "rank"} == {k: v for k, v in ranks[0].items() if k != "rank"}
    # What stays live between iterations is the rank's shards of the parameters and of Adam's two moments,
    # and the batch (Adam's steps are on the host), plus FSDP's own small tensors
    # (under 100 bytes here: world 1, 44 bytes; world 4, 92): the shards shrink with the world.
    whole = measured_rank(1, 0)
    assert not dist.is_initialized()
    assert (whole.world, whole.process_group) == (1, "fake") and whole.breakdown["parameters"] == PARAMETERS
    unsharded = BATCH * WIDTH * 4
    for world, live in ((1, whole.live_after_iteration[-1]), (4, ranks[0]["live_after"][-1])):
        assert 0 < live - (3 * PARAMETERS // world + unsharded) < 100, (world, live)


def ddp_step(gradient_as_bucket_view=None, backend="cpu", set_to_none=True):
    """Four Linear(256, 256) under DistributedDataParallel (or not: None), SGD, two iterations, at world 4;
    zero_grad(set_to_none=False) keeps the gradients (with gradient_as_bucket_view, the buckets' views)."""
    with oomguard.measure(card="t4", world=4, backend=backend) as m:
        torch.manual_seed(0)
        with torch.device(m.device):
            model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
        if gradient_as_bucket_view is not None:
            model = DistributedDataParallel(model, gradient_as_bucket_view=gradient_as_bucket_view)
        train_sum(m, model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(BATCH, WIDTH, device=m.device),
                  set_to_none=set_to_none)
    return m.result


def test_ddp_on_the_fake_group_keeps_a_bucket_copy_of_every_gradient():
    # Note [DDP on the fake group]: PyTorch's noop hook in place of the allreduce, which allocates nothing.
    # DDP's buckets hold every gradient's bytes from the first backward on (one bucket of 25 MiB at most
    # here): without gradient_as_bucket_view they are a copy beside the gradients, at the peak and
    # between iterations alike; with it the gradients are the buckets' views.
    plain, copied, viewed = ddp_step(), ddp_step(gradient_as_bucket_view=False), ddp_step(True)
    assert copied.outcome == viewed.outcome == "pass", copied.describe()
    assert copied.peak_bytes - plain.peak_bytes == PARAMETERS
    assert copied.live_after_iteration == [live + PARAMETERS for live in plain.live_after_iteration]
    assert viewed.live_after_iteration == copied.live_after_iteration  # zero_grad lets go of the views
    assert viewed.peak_bytes < copied.peak_bytes


@pytest.mark.parametrize("backend", ["cpu", "meta"])
def test_a_model_built_in_deferred_init_holds_only_its_materialized_shards(backend):
    # Note [Deferred init on the meta backend] (oomguard/fsdp_on_meta.py): built and sharded inside
    # m.deferred_init(), the model costs nothing; to_empty(device=m.device) makes the rank's shards, one
    # parameter at a time, the meta one freed as its new one is made: setup's peak is the shards,
    # PARAMETERS / world, on meta; cpu books the default meshes' rank tensors beside them, as in
    # test_fully_shard_on_meta_books_what_it_books_on_cpu (init_device_mesh makes them under
    # torch.device("cpu"), deferred or not): one of 4 x world bytes per unit.
    world = 4
    with oomguard.measure(card="t4", backend=backend, world=world) as m:
        before = m._scope.live_bytes  # what earlier tests of this process left alive is booked as live
        with m.deferred_init():
            model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
            for layer in model:
                fully_shard(layer)
            fully_shard(model)
        model.to_empty(device=m.device)
        m.track(model)
    r = m.result
    assert r.breakdown["parameters"] == PARAMETERS // world
    mesh_tensors = LAYERS * 4 * world if backend == "cpu" else 0
    assert r.phase_peak_bytes["setup"] - before == PARAMETERS // world + mesh_tensors
    with pytest.raises(RuntimeError, match=r"deferred_init\(\) outside the measurement"):
        with m.deferred_init():
            pass


def test_ddp_on_meta_rebuilds_its_buckets_and_its_patches_end_with_the_measurement():
    from torch.nn.parallel import distributed
    verify, pre_forward = distributed._verify_param_shape_across_processes, DistributedDataParallel._pre_forward
    with oomguard.measure(backend="meta", world=2) as m:
        with torch.device(m.device):
            model = DistributedDataParallel(nn.Linear(WIDTH, WIDTH))
        for _ in range(2):
            model(torch.randn(BATCH, WIDTH, device=m.device)).sum().backward()
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            torch.empty(1).copy_(torch.empty(1, device="meta"))  # outside _pre_forward, as PyTorch does
    assert model._has_rebuilt_buckets
    assert (distributed._verify_param_shape_across_processes, DistributedDataParallel._pre_forward) == \
        (verify, pre_forward)
    assert not dist.is_initialized()


def test_rank_and_world_are_checked():
    with pytest.raises(ValueError, match=r"rank=4 is not a rank of world=4 \(0..3\)"):
        oomguard.measure(world=4, rank=4)
    with pytest.raises(ValueError, match=r"rank=1 without world=: say how many ranks"):
        oomguard.measure(rank=1)
    with pytest.raises(ValueError, match=r"world=0 must be an int >= 1"):
        oomguard.measure(world=0)


def _rank_in_a_process_of_its_own(group, world, rank, store_path, out_path):
    """`python test_ranks.py fake|gloo WORLD RANK STORE OUT`: a fresh process, as a real rank's, so that
    the two are compared from the same start (a process's first FSDP step makes one-time state)."""
    if group == "gloo":
        dist.init_process_group("gloo", rank=rank, world_size=world, store=dist.FileStore(store_path, world))
        try:
            with oomguard.measure(card="t4") as m:  # the rank of the group there is
                sharded_step(m)
        finally:
            dist.destroy_process_group()
        result = m.result
    elif group.startswith("ddp"):  # ddp-BACKEND-copied|viewed|kept
        _, backend, buckets = group.split("-")
        result = ddp_step(gradient_as_bucket_view=buckets != "copied", backend=backend, set_to_none=buckets != "kept")
    else:
        result = measured_rank(world, rank, backend="meta" if group == "fake-meta" else "cpu")
    with open(out_path, "w") as out:
        json.dump(numbers(result), out)


def ranks_in_processes(group, world, scratch, measured=None):
    # New processes, not forks: a process that has run autograd cannot be forked into one that runs it.
    measured = range(world) if measured is None else measured
    ranks = [subprocess.Popen([sys.executable, __file__, group, str(world), str(rank),
                               os.path.join(scratch, f"{group}-store"), os.path.join(scratch, f"{group}{rank}.json")])
             for rank in measured]
    try:
        codes = [r.wait(timeout=120) for r in ranks]
    finally:
        for r in ranks:
            r.kill()
    assert codes == [0] * len(ranks), f"{group} ranks exited with {codes}"
    numbers_of = []
    for rank in measured:
        with open(os.path.join(scratch, f"{group}{rank}.json")) as f:
            numbers_of.append(json.load(f))
    return numbers_of


def test_real_gloo_ranks_hold_what_the_fake_group_says():
    world = 2
    with tempfile.TemporaryDirectory() as scratch:
        gloo = ranks_in_processes("gloo", world, scratch)
        fake = ranks_in_processes("fake", world, scratch)
    for rank in range(world):
        real, simulated = gloo[rank], fake[rank]
        assert (real["world"], real["rank"], real["process_group"]) == (world, rank, "gloo")
        assert (simulated["world"], simulated["rank"], simulated["process_group"]) == (world, rank, "fake")
        for what in ("parameters", "gradients", "optimizer_state"):
            assert real["breakdown"][what] == simulated["breakdown"][what], what
        assert real["live_after"] == simulated["live_after"]
        assert real["phase_peaks"]["setup"] == simulated["phase_peaks"]["setup"]
        # The loop's peaks are the fake group's or more: gloo runs each collective on a thread of its own,
        # and its work objects hold their buffers (a unit's gathered parameters: 263,168 bytes here) until
        # that thread lets go, later or sooner as the timing falls (Note [One rank in one process]).
        for phase, peak in simulated["phase_peaks"].items():
            assert real["phase_peaks"][phase] >= peak, phase


@pytest.mark.parametrize("world", [2, 4])
def test_fully_shard_on_meta_books_what_it_books_on_cpu(world):
    # Note [FSDP2 on meta] (oomguard/fsdp_on_meta.py): PyTorch's own fully_shard runs on meta, its
    # gathered parameters freed and re-made through the meta allocator, DTensor's fake tensors uncounted.
    # Each in a fresh process (a process's first FSDP step makes one-time state). The rank's shards,
    # gradients and Adam moments are cpu's; every peak and the live bytes are cpu's less the default
    # device mesh's rank tensor that each fully_shard(layer) makes and keeps, `torch.arange(world,
    # dtype=torch.int)` under torch.device("cpu") (torch/distributed/device_mesh.py, init_device_mesh):
    # 4 x world bytes, on the host on a GPU too, which only the cpu backend books. At the setup peak
    # (the first unit sharded) one of them is live; from the loop on, one per unit.
    with tempfile.TemporaryDirectory() as scratch:
        (cpu,) = ranks_in_processes("fake", world, scratch, measured=[0])
        (meta,) = ranks_in_processes("fake-meta", world, scratch, measured=[0])
    assert (cpu["outcome"], meta["outcome"]) == ("pass", "pass")
    assert meta["breakdown"] == cpu["breakdown"]
    assert meta["breakdown"]["parameters"] == PARAMETERS // world
    mesh_tensor = 4 * world
    want = {phase: peak - (mesh_tensor if phase == "setup" else LAYERS * mesh_tensor)
            for phase, peak in cpu["phase_peaks"].items()}
    assert meta["phase_peaks"] == want
    assert meta["live_after"] == [live - LAYERS * mesh_tensor for live in cpu["live_after"]]


@pytest.mark.parametrize("buckets", ["copied", "viewed", "kept"])
def test_ddp_on_meta_books_what_it_books_on_cpu(buckets):
    # Note [DDP on meta] (oomguard/ddp_on_meta.py): the cross-rank check skipped, the buckets rebuilt before
    # the second forward with this rank's own indices. Each in a fresh process, as fully_shard's. "copied":
    # without gradient_as_bucket_view; "viewed": with it; "kept": with it, and zero_grad(set_to_none=False).
    with tempfile.TemporaryDirectory() as scratch:
        (cpu,) = ranks_in_processes(f"ddp-cpu-{buckets}", 4, scratch, measured=[0])
        (meta,) = ranks_in_processes(f"ddp-meta-{buckets}", 4, scratch, measured=[0])
    assert (cpu["outcome"], meta["outcome"]) == ("pass", "pass")
    batch, loss = BATCH * WIDTH * 4, 4
    if buckets == "kept":
        # The rebuild makes the new buckets (a first of 1 MiB at most, dist._DEFAULT_FIRST_BUCKET_BYTES,
        # and the rest: the parameters' bytes) while the kept gradients still view the old one (DDP starts
        # with one bucket of every parameter when find_unused_parameters is False), on both backends:
        # the parameters, two buckets' bytes, the batch and the last loss, the run's peak in the second
        # forward.
        assert cpu["peak"] == cpu["phase_peaks"]["forward"] == 3 * PARAMETERS + batch + loss
    # The backward's peak too: the last Linear's gradients take sum()'s ones expanded to (8, 256),
    # strides (0, 0), which BLAS cannot read; cpu's mm copies them (addmm_impl_cpu_: 8,192 bytes, beside
    # the input's gradient and the weight's), and so does meta's (Note [Operand copies of a matrix
    # product], backends/meta/kernels/meta_kernels_matmul.cpp).
    assert meta["phase_peaks"] == cpu["phase_peaks"]
    assert meta == cpu


if __name__ == "__main__":
    _rank_in_a_process_of_its_own(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
