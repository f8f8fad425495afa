"""Which rank a measurement is: `oomguard.measure(world=N, rank=r)` and the process group it runs on.

Note [One rank in one process]: with world=N and no process group yet, the measurement makes
PyTorch's own fake one (torch.distributed's "fake" backend, c10d::FakeProcessGroup) for its duration:
its collectives complete at once and move no data, so the calling process is rank r of N at any N,
and the user's torch.distributed code (FSDP2's fully_shard) allocates what that rank allocates: the
shards, the gathered parameters, the reduce-scatter outputs. Where a process group exists already
(torchrun, a gloo group of the user's), the measurement is its rank and changes nothing about it.
"""
import torch.distributed as dist


def _check_count(name, value, lowest):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < lowest):
        raise ValueError(f"oomguard.measure: {name}={value!r} must be an int >= {lowest}")


class RankOfMeasurement:
    """The rank a measurement is (world, rank, the group's backend), and the fake group it made, if any."""

    def __init__(self, world, rank):
        _check_count("world", world, 1)
        _check_count("rank", rank, 0)
        if world is not None and rank is not None and rank >= world:
            raise ValueError(f"oomguard.measure: rank={rank} is not a rank of world={world} (0..{world - 1})")
        if rank is not None and world is None and not _initialized():
            raise ValueError(f"oomguard.measure: rank={rank} without world=: say how many ranks (world=N)")
        self.asked_world, self.asked_rank = world, rank
        self.world, self.rank, self.process_group = 1, 0, ""
        self._made_group = False

    def enter(self):
        """Joins the process group there is, or makes the fake one (Note [One rank in one process])."""
        if _initialized():
            world, rank = dist.get_world_size(), dist.get_rank()
            for name, asked, actual in (("world", self.asked_world, world), ("rank", self.asked_rank, rank)):
                if asked is not None and asked != actual:
                    raise ValueError(f"oomguard.measure: {name}={asked}, and this process is rank {rank} of a "
                                     f"process group of {world} ({dist.get_backend()}): leave {name}= out, or "
                                     "measure without a process group of your own")
            self.world, self.rank, self.process_group = world, rank, str(dist.get_backend())
        elif self.asked_world is not None:  # world=1 too: code that shards needs a group
            # Importing it registers the "fake" backend with torch.distributed (PyTorch's own way in).
            from torch.testing._internal.distributed.fake_pg import FakeStore
            self.world, self.rank, self.process_group = self.asked_world, self.asked_rank or 0, "fake"
            dist.init_process_group("fake", rank=self.rank, world_size=self.world, store=FakeStore())
            self._made_group = True
            _DdpOnTheFakeGroup.enter()

    def exit(self):
        """Ends the fake group this measurement made; a group of the user's stays."""
        if self._made_group:
            _DdpOnTheFakeGroup.exit()
            if _initialized():
                dist.destroy_process_group()
        self._made_group = False

    def label(self, result):
        if self.process_group:
            result.world, result.rank, result.process_group = self.world, self.rank, self.process_group


class _DdpOnTheFakeGroup:
    """Note [DDP on the fake group]: DistributedDataParallel's default communication hook reads the
    tensors its allreduce's future holds, and the fake group's futures hold None (c10d::FakeWork; DDP then
    fails in comm.cpp: "expected the hook result is either a Tensor or a TensorList found None"). While a
    measurement's fake group runs, a DDP module built on it gets PyTorch's own noop_hook
    (torch/distributed/algorithms/ddp_comm_hooks/debugging_hooks.py), which gives back the bucket as an
    in-place allreduce does: no allocation, so the rank's buckets and gradients are the real DDP's. A
    module that registers a hook of its own then meets DDP's "register_comm_hook ... can only be called
    once"."""

    _original_init = None

    @classmethod
    def enter(cls):
        from torch.nn.parallel import DistributedDataParallel
        if cls._original_init is not None:
            return
        cls._original_init = original = DistributedDataParallel.__init__

        def init(module, *args, **kwargs):
            original(module, *args, **kwargs)
            if dist.get_backend(module.process_group) == "fake":
                from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook
                module.register_comm_hook(None, noop_hook)

        DistributedDataParallel.__init__ = init

    @classmethod
    def exit(cls):
        from torch.nn.parallel import DistributedDataParallel
        if cls._original_init is not None:
            DistributedDataParallel.__init__ = cls._original_init
            cls._original_init = None


def _initialized():
    return dist.is_available() and dist.is_initialized()
