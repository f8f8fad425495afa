"""What m.track(...) accepts, as the C++ core takes it: parameters as tensors, an optimizer as its
kind, whether it keeps state, and a function reading its state's bytes (made lazily by step()).

Note [A rank's share of a DTensor]: a sharded parameter (FSDP2's fully_shard, tensor parallelism) is a
DTensor, whose own bytes are the whole tensor's; what a rank holds is its local tensor. The core is
given the local tensors, and the bytes of the DTensors' gradients and optimizer state are read from
their local tensors too: every number is the rank's, as the ledger books it."""
import weakref

import torch

try:
    from torch.distributed.tensor import DTensor
except ImportError:  # a torch built without distributed
    DTensor = None

ACCEPTED = "a torch.nn.Module, a torch.optim.Optimizer, a tensor, or an iterable of tensors"


def local(tensor):
    """The rank's own tensor: a DTensor's local shard, any other tensor itself."""
    if DTensor is not None and isinstance(tensor, DTensor):
        return tensor._local_tensor
    return tensor


def is_sharded(tensor):
    return DTensor is not None and isinstance(tensor, DTensor)


def parameters_of(thing):
    """The tensors of a module, a tensor or an iterable of tensors, each once."""
    if isinstance(thing, torch.nn.Module):
        return list(thing.parameters())
    if isinstance(thing, torch.Tensor):
        return [thing]
    try:
        tensors = list(thing)
    except TypeError:
        raise TypeError(f"oomguard: track({type(thing).__name__}): not {ACCEPTED}") from None
    unique = {}
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"oomguard: track(): an iterable holding a {type(t).__name__}: not {ACCEPTED}")
        unique.setdefault(id(t), t)
    return list(unique.values())


def optimizer_of(thing, device):
    """(kind, keeps_state, state_bytes) for a torch.optim.Optimizer, else None."""
    if not isinstance(thing, torch.optim.Optimizer):
        return None
    kind = type(thing).__name__
    keeps_state = not (kind == "SGD" and all(g.get("momentum", 0) == 0 for g in thing.param_groups))
    return kind, keeps_state, _state_reader(weakref.ref(thing), device)


def _state_reader(optimizer_ref, device):
    def state_bytes():
        """The tensors the optimizer keeps per parameter on the measured device, as its ledger books them:
        Adam's moments, not its `step` counts (host memory beside cuda or meta parameters, and on the cpu
        backend too: Note [The Python optimizer's step counts], backends/host_scalars.h)."""
        optimizer = optimizer_ref()
        if optimizer is None:
            return None
        tensors = (local(v) for per_parameter in optimizer.state.values() for k, v in per_parameter.items()
                   if isinstance(v, torch.Tensor) and not _host_step_count(k, v))
        return sum(t.nbytes for t in tensors if t.device.type == device.type)

    return state_bytes


def _host_step_count(key, tensor):
    """Adam's and its kin's step count: a 0-dim cpu tensor whatever the parameters' device."""
    return key == "step" and tensor.dim() == 0 and tensor.device.type == "cpu"


def gradient_reader(sharded):
    """The bytes of the sharded parameters' gradients now (Note [A rank's share of a DTensor])."""
    refs = [weakref.ref(p) for p in sharded]

    def gradient_bytes():
        grads = (p.grad for p in (ref() for ref in refs) if p is not None and p.grad is not None)
        return sum(local(g).nbytes for g in grads)

    return gradient_bytes
