"""Python.CardModeMatchesFakeCuda's cases for the fused attention fast path (Note [The attention fast
path on a card], backends/meta/kernels/meta_kernels_transformer_cuda.cpp), used by test_fake_cuda_ops.py.

nn.MultiheadAttention's own forward on fake cuda tensors, in evaluation under no_grad, calls
aten._native_multi_head_attention (checked here), so the op-by-op comparison holds card mode's outputs
of it to fake CUDA's. nn.TransformerEncoderLayer's calls aten._transformer_encoder_layer_fwd, which
torch 2.11 gives fake tensors no kernel for: its bytes are checked against the sources by hand only
(tests/card_fast_path_test.cpp)."""
import torch
import torch.nn as nn

FUSED = "aten._native_multi_head_attention.default"


def mha_fast_path(build, dtype, need_weights=False, padding_mask=False):
    """nn.MultiheadAttention's fused fast path (batch_first self-attention, 4 heads of 16): the module's
    own forward, which takes it on fake cuda tensors and, in a meta measurement, on meta (Note [Meta
    takes the attention fast path in Python]). Nothing to differentiate."""
    def case(device):
        b, t, d, heads = 2, 32, 64, 4
        mha = build(lambda: nn.MultiheadAttention(d, heads, batch_first=True), device, dtype)
        mha.eval()
        x = torch.randn(b, t, d, device=device, dtype=dtype)
        # A bool padding mask (the fast path refuses float ones), which the forward turns into the float
        # [B, T] mask it hands over (F._canonical_mask), mask_type 1.
        mask = torch.zeros(b, t, device=device, dtype=torch.bool) if padding_mask else None
        with torch.no_grad():
            mha(x, x, x, key_padding_mask=mask, need_weights=need_weights)
        return None
    return case


def cases(build):
    """By dtype: no weights and no mask (the fused SDPA path on a card whose chooser picks a fused
    backend), weights (the math path), a padding mask (the math path's masked softmax)."""
    result = {}
    for dtype in (torch.half, torch.bfloat16, torch.float32):
        n = str(dtype).removeprefix("torch.")
        result[f"mha_fast_path_{n}"] = mha_fast_path(build, dtype)
        result[f"mha_fast_path_{n}_weights"] = mha_fast_path(build, dtype, need_weights=True)
        result[f"mha_fast_path_{n}_padding_mask"] = mha_fast_path(build, dtype, padding_mask=True)
    return result


def encoder_layer_on_fake_cuda(build):
    """nn.TransformerEncoderLayer's forward in evaluation under no_grad on fake cuda tensors (the fake
    process): the first lines of its error and of the one it was raised in handling of (no fake kernel,
    then the unsafe fallback's real tensors on the fake device asking for a driver), or None if it ran."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        layer = build(lambda: nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True),
                      torch.device("cuda"))
        layer.eval()
        try:
            with torch.no_grad():
                layer(torch.randn(2, 32, 64, device="cuda"))
        except Exception as e:  # noqa: BLE001 - reported
            return " / ".join(str(x).splitlines()[0] for x in (e.__context__, e) if x is not None and str(x))
    return None


def weights_imprecision(card_out, fake_out):
    """attention.cu native_multi_head_attention_cuda returns an undefined weights tensor (Python's None)
    without need_weights (`qkt = Tensor()`, or `Tensor()` on the fused path); _meta_registrations.py's
    native_multi_head_attention_fake makes query.new_empty(0)."""
    if card_out[0] == fake_out[0] and card_out[1] is None and fake_out[1][2] == (0,) and fake_out[1][6] == 0:
        return "no weights are an undefined tensor on a card, an empty one on fake CUDA (attention.cu)"
    return None


def check_fast_path(check, same_forward, forwards, fake_forwards, encoder_layer_error):
    """Each case's forward takes the fused op on fake CUDA and in card mode on a T4 (the op sequences are
    compared whole with the other forwards); the encoder layer's fused op still has no fake kernel."""
    for name in (n for n in same_forward if n.startswith("mha_fast_path_")):
        check(f"{name}: the module's forward on fake CUDA takes the fused op", FUSED in fake_forwards[name], True)
        check(f"{name}: so does card mode's", FUSED in forwards[(name, "t4")], True)
    print(f"nn.TransformerEncoderLayer on fake CUDA: {encoder_layer_error}")
    check("nn.TransformerEncoderLayer's fast path on fake CUDA has no fake kernel", encoder_layer_error is not None
          and "aten::_transformer_encoder_layer_fwd" in encoder_layer_error, True)
