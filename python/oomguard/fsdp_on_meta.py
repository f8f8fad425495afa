"""PyTorch's FSDP2 (fully_shard) on the meta backend.

Note [FSDP2 on meta]: torch 2.11's FSDP2 runs on a mesh's device and refuses meta parameters, so a
user's `fully_shard` loop could be measured on cpu only, never at a 70B's size. Four things stand in
its way, and while a meta measurement runs each is given what FSDP2 gives a cpu mesh:
1. The device: fully_shard takes it from the mesh (`_get_device_from_mesh`, _fsdp_init.py), a cpu mesh
   without a GPU, so the all-gather outputs, the unsharded parameters and the reduce-scatter buffers
   would be host memory beside meta activations ("expected device cpu but got meta" in backward). Here
   the device is meta, and `_get_device_handle("meta")` (which has none) is torch.cpu's: its streams and
   events are the no-ops a cpu mesh runs with.
2. `FSDPParamGroup._validate_no_meta_params` refuses meta shards at the first forward: skipped.
3. FSDP2 frees an unsharded parameter by `untyped_storage().resize_(0)` and re-materialises it by
   `resize_(bytes)` (_fsdp_param.py's free_storage / alloc_storage); on meta LibTorch's resize only
   sets the size and asks no allocator, so the gathered parameters would stay booked for the whole run.
   Here a meta storage is resized through its allocator, as cpu's resize_bytes_cpu does (Note [Resizing a
   storage on meta], workload/parallel/fsdp_storage.h), the C++ strategies' own path.
4. Note [Fake tensors are shapes]: DTensor propagates an op's sharding the first time it meets it by
   running the op on fake tensors of the global shapes (_sharding_prop.py's
   _propagate_tensor_meta_non_cached, _op_schema.py's gen_fake_args under FakeTensorMode), whose
   storages are meta: on a GPU host-side bookkeeping, on the meta backend they were booked as the
   rank's memory (a full Linear(256, 256) weight, 262,144 B, for each parameter fully_shard made, and
   Adam's first step's). What FakeTensorMode allocates, in its dispatch and in from_tensor, is uncounted
   (UncountedMetaScope, allocators/meta_tracking_allocator.h), for any user of fake tensors (torch.compile's
   tracing too).
Note [Deferred init on the meta backend]: a GPU loop that builds a 70B model for FSDP2 builds it on
torch.device("meta"), which costs nothing, shards it and materializes the shards with
`model.to_empty(device="cuda")`. On the meta backend meta *is* the measured device, so a model built there
holds all of it (a 70B in float32: 280 GB at setup). `m.deferred_init()` (measure.py) makes what is built
inside uncounted on the meta backend (UncountedMetaScope), and is torch.device("meta") on the others; after
it, to_empty(device=m.device) allocates the shards, counted, on every backend alike.
The collectives are the fake group's (Note [One rank in one process], ranks.py): on meta they move no
data either way. The check: Python.OneRankOfAShardedRun, the same fully_shard loop on meta and cpu, in
the fake group, to the byte but for the default meshes' rank tensors, which only cpu books.
"""
import torch

from oomguard import _core
from oomguard.patches import Patches

_META = torch.device("meta")


class Fsdp2OnMeta:
    """The patches of Note [FSDP2 on meta], for the duration of a meta measurement."""

    def __init__(self):
        self._patches = Patches()

    def enter(self):
        try:
            from torch.distributed.fsdp._fully_shard import (
                _fsdp_collectives, _fsdp_param, _fsdp_param_group, _fsdp_state, _fully_shard)
        except ImportError:  # a torch without FSDP2 (no distributed build)
            return
        original_handle = _fsdp_param_group._get_device_handle

        def device_handle(device_type):
            return torch.cpu if device_type == "meta" else original_handle(device_type)

        def device_from_mesh(mesh):
            return _META

        def alloc_storage(tensor):
            if tensor.is_meta:
                return _core.resize_storage_bytes(tensor, tensor.numel() * tensor.itemsize)
            return original_alloc(tensor)

        def free_storage(tensor):
            if tensor.is_meta:
                return _core.resize_storage_bytes(tensor, 0)
            return original_free(tensor)

        from torch._subclasses.fake_tensor import FakeTensorMode
        original_dispatch, original_from_tensor = FakeTensorMode.__torch_dispatch__, FakeTensorMode.from_tensor

        def fake_dispatch(mode, func, types, args=(), kwargs=None):
            with _core.UncountedMeta():
                return original_dispatch(mode, func, types, args, kwargs)

        def fake_from_tensor(mode, *args, **kwargs):
            with _core.UncountedMeta():
                return original_from_tensor(mode, *args, **kwargs)

        self._patches.patch(FakeTensorMode, "__torch_dispatch__", fake_dispatch)
        self._patches.patch(FakeTensorMode, "from_tensor", fake_from_tensor)
        original_alloc, original_free = _fsdp_param.alloc_storage, _fsdp_param.free_storage
        for module in (_fsdp_param_group, _fsdp_collectives, _fsdp_state):
            self._patches.patch(module, "_get_device_handle", device_handle)
        self._patches.patch(_fully_shard, "_get_device_from_mesh", device_from_mesh)
        self._patches.patch(_fsdp_param_group.FSDPParamGroup, "_validate_no_meta_params", lambda group: None)
        self._patches.patch(_fsdp_param, "alloc_storage", alloc_storage)
        self._patches.patch(_fsdp_param, "free_storage", free_storage)
        self._patches.patch(_fsdp_param_group, "alloc_storage", alloc_storage)

    def exit(self):
        self._patches.undo()
