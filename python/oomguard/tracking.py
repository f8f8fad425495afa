"""What m.track(...) accepts, as the C++ core takes it: parameters as tensors, an optimizer as its
kind, whether it keeps state, and a function reading its state's bytes (made lazily by step())."""
import weakref

import torch

ACCEPTED = "a torch.nn.Module, a torch.optim.Optimizer, a tensor, or an iterable of tensors"


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
        Adam's moments, and its `step` tensors on cpu (they stay on the host beside meta or cuda)."""
        optimizer = optimizer_ref()
        if optimizer is None:
            return None
        return sum(v.nbytes for per_parameter in optimizer.state.values() for v in per_parameter.values()
                   if isinstance(v, torch.Tensor) and v.device.type == device.type)

    return state_bytes
