"""nn.MultiheadAttention's and nn.TransformerEncoderLayer's fused fast path taken on meta where cpu and a GPU
take it, for the duration of a meta measurement.

Note [Meta takes the attention fast path in Python]: in evaluation under no_grad, nn.MultiheadAttention
calls torch._native_multi_head_attention and nn.TransformerEncoderLayer torch._transformer_encoder_layer_fwd,
but only for tensors whose device type is in a list: activation.py's _check_arg_device (cpu, cuda and the
privateuse1 backend) and the list transformer.py spells out in the layer's forward (cpu, cuda, xpu,
privateuse1). Meta is in neither, so without this a meta run took the module's unfused path, other ops and
other bytes than cpu's and a GPU's, without a word (an encoder layer at [8, 128, 64]: 3,083,520 bytes at
the peak on meta, 3,607,808 on cpu). While a meta measurement runs, _check_arg_device also accepts meta,
and the layer's forward runs a copy of its code whose list reads "meta" where it read "xpu" (no xpu
tensor takes part in a meta run); every other condition of the fast path (training, grad mode, masks,
dtypes, hooks) stays as PyTorch wrote it, so meta takes the fused path exactly where cpu does, and the
fused ops' Meta kernels (backends/meta/kernels/meta_kernels_transformer.cpp) allocate what cpu's do. The
TorchScript loader does the same to a scripted module's graphs (Note [Meta takes the attention fast path],
nn/torchscript/meta_fast_path.h).

nn.TransformerEncoder's own fast path is left as it is: in evaluation with a src_key_padding_mask it first
asks whether the mask is left-aligned (torch._nested_tensor_from_mask_left_aligned reads the mask's values:
on meta that op had no kernel and the forward raised), and under no_grad cpu and a GPU then run the batch
as a nested tensor, padding neither computed nor stored. Meta has no nested tensors: the question is
answered yes (what a padding mask is), the device check that follows keeps meta's batch padded, as
enable_nested_tensor=False would, and the measurement warns that its bytes hold the padding theirs skip.
The check: Python.MetaTakesTheFastPath.
"""
import inspect

import torch
from torch import nn
from torch.nn.modules import activation

from oomguard.patches import Patches

_NESTED_WARNING = (
    "nn.TransformerEncoder with a src_key_padding_mask in evaluation under no_grad: cpu and a GPU run a "
    "left-aligned padded batch as a nested tensor, its padding neither computed nor stored "
    "(torch/nn/modules/transformer.py's sparsity fast path); meta has no nested tensors and ran it padded, "
    "as enable_nested_tensor=False does: more bytes than theirs. Build the encoder with "
    "enable_nested_tensor=False for bytes equal to theirs")

_library = None  # the Meta kernel of _nested_tensor_from_mask_left_aligned, registered once
_measurements = 0  # meta measurements running: outside them the op raises on meta, as PyTorch's has no kernel


def _left_aligned(tensor, mask):
    if _measurements == 0:
        raise NotImplementedError("aten::_nested_tensor_from_mask_left_aligned: attempted to run this operator "
                                  "with Meta tensors, but there was no Meta kernel registered")
    return True


def _register_left_aligned_kernel():
    global _library
    if _library is None:
        _library = torch.library.Library("aten", "IMPL", "Meta")
        _library.impl("_nested_tensor_from_mask_left_aligned", _left_aligned)


def _with_meta_in_device_list(function):
    """A copy of `function`'s code whose device-type list reads "meta" where it read "xpu"; None when the
    list is not there (another PyTorch may check the device otherwise)."""
    code = function.__code__
    if code.co_consts.count("xpu") != 1:
        return None
    return code.replace(co_consts=tuple("meta" if c == "xpu" else c for c in code.co_consts))


class FastPathOnMeta:
    """The patches of Note [Meta takes the attention fast path in Python], for a meta measurement."""

    def __init__(self):
        self._patches = Patches()
        self._entered = False
        self.warnings = []

    def enter(self):
        global _measurements
        self.warnings = []
        _register_left_aligned_kernel()
        _measurements += 1
        self._entered = True
        original_check = activation._check_arg_device

        def check_arg_device(x):
            return original_check(x) or x.device.type == "meta"

        self._patches.patch(activation, "_check_arg_device", check_arg_device)
        layer_forward = nn.TransformerEncoderLayer.forward
        code = _with_meta_in_device_list(layer_forward)
        if code is None:
            self.warnings.append(
                "nn.TransformerEncoderLayer's forward checks the device otherwise than torch 2.11's (no "
                "device list with \"xpu\" in it): on meta it may take its unfused path where cpu and a GPU "
                "take the fused one, other bytes than theirs")
        else:
            self._patches.patch(layer_forward, "__code__", code)
        original_encoder_forward = nn.TransformerEncoder.forward
        signature = inspect.signature(original_encoder_forward)
        warnings = self.warnings

        def encoder_forward(encoder, *args, **kwargs):
            given = signature.bind(encoder, *args, **kwargs).arguments
            src, padding = given.get("src"), given.get("src_key_padding_mask")
            if (padding is not None and isinstance(src, torch.Tensor) and src.device.type == "meta"
                    and not torch.is_grad_enabled() and getattr(encoder, "use_nested_tensor", False)
                    and not encoder.layers[0].training and _NESTED_WARNING not in warnings):
                warnings.append(_NESTED_WARNING)
            return original_encoder_forward(encoder, *args, **kwargs)

        self._patches.patch(nn.TransformerEncoder, "forward", encoder_forward)

    def exit(self):
        global _measurements
        if self._entered:
            _measurements -= 1
            self._entered = False
        self._patches.undo()
