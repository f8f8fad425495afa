"""What PyTorch's Python code picks for CUDA tensors, picked for meta tensors in card mode.

Note [PyTorch's Python choices for CUDA tensors]: some of PyTorch's Python decides by the device,
not by a kernel: torch.optim's optimizers run their foreach implementation by default for tensors of
the devices `_get_foreach_kernels_supported_devices()` names (cuda, not cpu or meta;
torch/optim/optimizer.py, _default_to_fused_or_foreach). The foreach step makes one temporary per
parameter at once (Adam's `exp_avg_sq.sqrt()` list: the parameters' bytes again), the for-loop step
one parameter's at a time, so on a card a Python optimizer's step needs more than cpu's step shows.
With kernels="cuda" a measurement on meta picks as PyTorch picks for cuda tensors: meta counts as
a foreach device while it runs (an optimizer given foreach= or fused= explicitly keeps its choice),
for the optimizers and for torch.nn.utils' clip_grad_norm_ and clip_grad_value_, which ask
torch/utils/_foreach_utils.py's own copy of the list (clip_grad_norm_ then runs _foreach_norm, as on a
GPU; its CUDA kernel's buffers are not modelled, and the measurement says so).
"""
import contextlib

import torch
import torch.optim.optimizer as optimizer_module
import torch.utils._foreach_utils as foreach_utils

_FOREACH_DEVICES = optimizer_module._get_foreach_kernels_supported_devices  # PyTorch's own
_in_card_mode = 0  # measurements with kernels="cuda" running now (on any thread)
_FOREACH_NORM = torch._foreach_norm  # PyTorch's own
_foreach_norm_ran = False  # since the last foreach_norm_warnings()

FOREACH_NORM_WARNING = (
    "aten::_foreach_norm (clip_grad_norm_'s, as on a GPU) runs on meta as one norm per tensor, while a card runs "
    "ForeachReduceOp.cu's multi-tensor kernel (a float buffer of partial norms for every 65,536-element chunk of "
    "every tensor, and the results in one tensor), which card mode does not model: its bytes on meta are not the "
    "card's")


def _noted_foreach_norm(*args, **kwargs):
    global _foreach_norm_ran
    _foreach_norm_ran = True
    return _FOREACH_NORM(*args, **kwargs)


def foreach_norm_warnings():
    """[FOREACH_NORM_WARNING] if torch._foreach_norm ran in card mode since the last call; forgets it."""
    global _foreach_norm_ran
    ran, _foreach_norm_ran = _foreach_norm_ran, False
    return [FOREACH_NORM_WARNING] if ran else []


def _foreach_devices_with_meta():
    return _FOREACH_DEVICES() + ["meta"]


@contextlib.contextmanager
def picked_as_for_cuda():
    """Inside: PyTorch's Python picks for meta tensors what it picks for cuda ones."""
    global _in_card_mode
    _in_card_mode += 1
    optimizer_module._get_foreach_kernels_supported_devices = _foreach_devices_with_meta
    foreach_utils._get_foreach_kernels_supported_devices = _foreach_devices_with_meta
    torch._foreach_norm = _noted_foreach_norm
    try:
        yield
    finally:
        _in_card_mode -= 1
        if _in_card_mode == 0:
            optimizer_module._get_foreach_kernels_supported_devices = _FOREACH_DEVICES
            foreach_utils._get_foreach_kernels_supported_devices = _FOREACH_DEVICES
            torch._foreach_norm = _FOREACH_NORM
