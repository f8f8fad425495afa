"""PyTorch's DistributedDataParallel on the meta backend, in the measurement's fake group.

Note [DDP on meta]: DistributedDataParallel reads values from its parameters' device twice, which meta
has none of. While a meta measurement runs, in the fake group (Note [One rank in one process], ranks.py),
each read is given what it would read there on cpu:
1. Its constructor checks the parameters across ranks (torch/nn/parallel/distributed.py calls
   _verify_param_shape_across_processes, torch/distributed/utils.py; its C++,
   verify_params_across_processes in reducer.cpp, allgathers the parameter count and reads each rank's
   by .item(), then broadcasts the shapes and strides and reads them back on the host). In one process
   every rank is this one: nothing to check, so it is skipped. What it would allocate on a GPU (the
   count and its world gathered copies, 8 x (world + 1) bytes, and the shapes: 16 bytes per dimension)
   is gone from the setup phase; _sync_module_states' flattened parameters, right after, are larger.
2. Before the second forward, `_pre_forward` has the Reducer rebuild its buckets in the order the
   gradients came (Reducer::rebuild_buckets). It lets go of the old buckets before it makes the new ones
   (initialize_buckets), but gradients that are the old buckets' views (gradient_as_bucket_view, kept by
   zero_grad(set_to_none=False)) hold them until they are copied into the new: a transient a GPU has
   too, so the rebuild runs. Its sync_bucket_indices copies the indices to the device, broadcasts them
   from rank 0 and copies them back into host tensors, and the copy out of meta is refused ("Cannot copy
   out of meta tensor; no data!"). The fake group's broadcast moves nothing, so on cpu those host
   tensors keep what they held: this rank's own indices. Around `_pre_forward`, a dispatch mode makes a
   copy from a meta tensor into a non-meta one leave the destination as it is, the cpu run's outcome;
   every other op runs as it would. A Python dispatch mode rather than a Meta kernel of oomguard's for
   copy_ (there is none; PyTorch's CompositeExplicitAutograd copy_ serves Meta): it holds for
   `_pre_forward` alone, and outside it the copy out of meta fails as PyTorch's does.
The Reducer has no timer for meta (TimerRegistry has cpu's and CUDA's), so DDP's logger warns once that
it collects no time stats: nothing is allocated for them on meta, and on a GPU they are CUDA events.
The check: Python.OneRankOfAShardedRun, a DDP loop on meta and on cpu in the fake group.
"""
import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from oomguard.patches import Patches


class DdpOnMeta:
    """The patches of Note [DDP on meta], for the duration of a meta measurement."""

    def __init__(self):
        self._patches = Patches()

    def enter(self):
        if not dist.is_available():
            return
        from torch.nn.parallel import distributed
        original_verify = distributed._verify_param_shape_across_processes
        original_pre_forward = distributed.DistributedDataParallel._pre_forward

        def verify(process_group, tensors, logger=None):
            if _meta_on_the_fake_group(process_group, tensors):
                return None
            return original_verify(process_group, tensors, logger)

        def pre_forward(ddp, *inputs, **kwargs):
            if not _meta_on_the_fake_group(ddp.process_group, ddp.module.parameters()):
                return original_pre_forward(ddp, *inputs, **kwargs)
            with _CopiesOutOfMetaLeaveTheirDestination():
                return original_pre_forward(ddp, *inputs, **kwargs)

        self._patches.patch(distributed, "_verify_param_shape_across_processes", verify)
        self._patches.patch(distributed.DistributedDataParallel, "_pre_forward", pre_forward)

    def exit(self):
        self._patches.undo()


def _meta_on_the_fake_group(process_group, parameters):
    return dist.get_backend(process_group) == "fake" and any(p.is_meta for p in parameters)


class _CopiesOutOfMetaLeaveTheirDestination(TorchDispatchMode):
    """Note [DDP on meta], 2: the host tensors of the fake group's broadcast already hold its result."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.copy_.default and args[1].is_meta and not args[0].is_meta:
            return args[0]
        return func(*args, **(kwargs or {}))
