"""Python.MetaTakesTheFastPath: nn.MultiheadAttention and nn.TransformerEncoderLayer take their fused fast
path on meta where they take it on cpu (Note [Meta takes the attention fast path in Python],
python/oomguard/fast_path_on_meta.py), so the user's evaluation loop books cpu's bytes on meta.

1. In evaluation under no_grad, cpu runs aten::_native_multi_head_attention (MHA) and
   aten::_transformer_encoder_layer_fwd (the layer); so does meta, and every phase peak, live byte count and
   the peak equal cpu's (before the patch, the layer peaked at 3,083,520 bytes on meta and 3,607,808 on cpu).
2. Where cpu does not take the fast path (training, or grad enabled), neither does meta: same ops, same bytes.
3. Outside a measurement nothing stays patched: PyTorch's own device check refuses meta again, and the
   left-aligned check on meta tensors raises as before.
4. nn.TransformerEncoder with a padding mask in evaluation under no_grad: cpu runs the batch as a nested
   tensor, meta cannot; meta runs and says so in its warnings, and with enable_nested_tensor=False (dense on
   both) meta equals cpu with no warning.
"""
import contextlib
import os

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])

import torch
from torch import nn
from torch.nn.modules import activation
from torch.profiler import ProfilerActivity, profile

from checks import Checks

torch.set_num_threads(1)

import oomguard  # noqa: E402

FUSED = ("aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd")


def build(kind, device):
    torch.manual_seed(0)
    if kind == "mha":
        return nn.MultiheadAttention(64, 4, batch_first=True).to(device)
    if kind == "layer":
        return nn.TransformerEncoderLayer(64, 4, 256, batch_first=True).to(device)
    if kind == "layer_norm_first":
        return nn.TransformerEncoderLayer(64, 4, 256, batch_first=True, norm_first=True).to(device)
    nested = kind == "encoder_nested"
    return nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 256, batch_first=True), 2,
                                 enable_nested_tensor=nested).to(device)


def forward(kind, model, x, padding):
    if kind == "mha":
        return model(x, x, x, need_weights=False)[0]
    if kind.startswith("encoder"):
        return model(x, src_key_padding_mask=padding)
    return model(x)


def measured(kind, backend, train=False, no_grad=True, kernels=None, autocast=False):
    """The measurement and the fused ops the loop ran."""
    with oomguard.measure(card="t4", backend=backend, kernels=kernels) as m:
        model = build(kind, m.device).train(train)
        x = torch.ones(8, 128, 64, device=m.device)
        padding = torch.zeros(8, 128, dtype=torch.bool, device=m.device)
        if backend == "cpu":
            padding[:, 100:] = True  # left-aligned: cpu's encoder takes its nested path
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in m.iterations(2):
                with torch.set_grad_enabled(not no_grad), m.phase("eval"), \
                        (m.autocast(torch.bfloat16) if autocast else contextlib.nullcontext()):
                    y = forward(kind, model, x, padding)
                    if not no_grad:
                        y.sum().backward()
                del y
    ran = {e.key for e in prof.key_averages() if e.key in FUSED}
    return m.result, ran


def numbers(result):
    return {"peak": result.peak_bytes, "phases": dict(result.phase_peak_bytes),
            "live": list(result.live_after_iteration)}


def main():
    check = Checks()
    # The layer's fused op calls the attention's.
    for kind, fused in (("mha", {FUSED[0]}), ("layer", set(FUSED)), ("layer_norm_first", set(FUSED))):
        cpu, cpu_ran = measured(kind, "cpu")
        meta, meta_ran = measured(kind, "meta")
        check(f"{kind}: cpu takes the fused fast path in evaluation under no_grad", cpu_ran, fused)
        check(f"{kind}: so does meta", meta_ran, fused)
        check(f"{kind}: meta's numbers are cpu's", numbers(meta), numbers(cpu))
        check(f"{kind}: no warning", [w for w in meta.warnings if "fast path" in w or "nested" in w], [])
        for train, no_grad in ((True, True), (False, False)):
            cpu, cpu_ran = measured(kind, "cpu", train=train, no_grad=no_grad)
            meta, meta_ran = measured(kind, "meta", train=train, no_grad=no_grad)
            what = f"{kind} ({'training' if train else 'evaluation'}, grad {'off' if no_grad else 'on'})"
            check(f"{what}: cpu runs the unfused path", cpu_ran, set())
            check(f"{what}: so does meta", meta_ran, set())
            check(f"{what}: meta's numbers are cpu's", numbers(meta), numbers(cpu))

    # Under autocast: cpu's autocast leaves torch.is_autocast_enabled() (which asks about cuda) False and cpu
    # takes the fast path, as meta on cpu's table does; a GPU's torch.autocast("cuda") makes it True and its
    # layer and attention take their unfused paths, as meta on a card's kernels does (Note [Autocast on meta
    # as the loop sees it]).
    for kind in ("layer", "mha"):
        cpu, cpu_ran = measured(kind, "cpu", autocast=True)
        meta, meta_ran = measured(kind, "meta", autocast=True)
        check(f"{kind} under bf16 autocast: cpu's fused ops", cpu_ran, set(FUSED) if kind == "layer" else {FUSED[0]})
        check(f"{kind} under bf16 autocast: meta's are cpu's", meta_ran, cpu_ran)
        check(f"{kind} under bf16 autocast: meta's numbers are cpu's", numbers(meta), numbers(cpu))
        _, card_ran = measured(kind, "meta", kernels="cuda", autocast=True)
        check(f"{kind} under bf16 autocast in card mode: the card's fused ops", card_ran, set())
        _, card_ran = measured(kind, "meta", kernels="cuda")
        check(f"{kind} without autocast in card mode: the card's fused ops", card_ran,
              {FUSED[0]} if kind == "mha" else set(FUSED))
    check("after the measurements: torch.is_autocast_enabled is PyTorch's own",
          torch.is_autocast_enabled is torch._C.is_autocast_enabled, True)

    x = torch.empty(2, 3, device="meta")
    check("after the measurements: PyTorch's own device check refuses meta again",
          activation._check_arg_device(x), False)
    try:
        torch._nested_tensor_from_mask_left_aligned(x, torch.ones(2, 3, dtype=torch.bool, device="meta"))
        check("outside a measurement the left-aligned check raises on meta", "no error", "NotImplementedError")
    except NotImplementedError:
        pass
    del x  # alive, it would count in the next measurements' live bytes

    cpu, _ = measured("encoder_dense", "cpu")
    meta, _ = measured("encoder_dense", "meta")
    check("encoder, enable_nested_tensor=False: meta's numbers are cpu's", numbers(meta), numbers(cpu))
    check("encoder, enable_nested_tensor=False: no warning", [w for w in meta.warnings if "nested" in w], [])
    cpu, _ = measured("encoder_nested", "cpu")
    meta, _ = measured("encoder_nested", "meta")
    nested_warnings = [w for w in meta.warnings if "nested tensor" in w]
    check("encoder with its nested path: meta runs and says it ran the batch padded", len(nested_warnings), 1)
    check("... naming the fix", "enable_nested_tensor=False for bytes equal to theirs" in nested_warnings[0], True)
    check("... and cpu's nested batch books fewer bytes than meta's padded one",
          cpu.phase_peak_bytes["eval"] < meta.phase_peak_bytes["eval"], True)
    return check.exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
