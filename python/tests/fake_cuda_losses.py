"""Python.CardModeMatchesFakeCuda's case for the losses besides cross entropy and mse (Note [Losses on a
card], backends/meta/kernels/meta_kernels_loss.cpp), used by test_fake_cuda_ops.py, and the fake kernels'
one imprecision for them: a reduced loss's storage."""
import torch
import torch.nn.functional as F

# The reduced losses whose 0-dim result keeps the elementwise loss's storage on cpu and CUDA.
REDUCED_KEEP_STORAGE = ("aten.mse_loss.default", "aten.smooth_l1_loss.default", "aten.binary_cross_entropy.default")


def losses(device):
    """The losses besides cross entropy and mse (Note [Losses on a card]), fp32 and bf16: binary cross
    entropy with and without logits, smooth L1, Huber, L1 and KL divergence, and log_sigmoid, whose buffer
    is empty on a card (fake CUDA's decomposition makes it new_zeros((0,)) for cuda tensors too)."""
    total = 0
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(4, 8, device=device, dtype=dtype, requires_grad=True)
        t = torch.rand(4, 8, device=device, dtype=dtype)
        loss = (F.binary_cross_entropy(torch.sigmoid(x), t) + F.binary_cross_entropy_with_logits(x, t)
                + F.smooth_l1_loss(x, t) + F.huber_loss(x, t, reduction="sum") + F.l1_loss(x, t)
                + F.kl_div(F.log_softmax(x, -1), t, reduction="batchmean") + F.logsigmoid(x).sum())
        total = total + loss.float()
    return total


def reduced_loss_imprecision(op, card_out, fake_out):
    """Why card mode's reduced loss holds more storage than the fake kernel's, or None."""
    # Loss.cpp's TORCH_META_FUNC(mse_loss) and TORCH_META_FUNC(smooth_l1_loss), the structured kernels'
    # for cpu and CUDA alike, size the output like the elementwise loss (build_borrowing_binary_op),
    # then resize_({}) keeps that storage; Loss.cu's binary_cross_entropy_out_cuda (and Loss.cpp's
    # _cpu) computes into empty_like(input) and then loss.resize_as_(loss_reduced) keeps it too (eager
    # cpu's F.mse_loss of a [2, 8, 8, 8] fp16 input: 2048 bytes; F.smooth_l1_loss and
    # F.binary_cross_entropy of a [4, 8] float input: 128); the fake kernels make a 0-dim.
    if card_out[:6] == fake_out[:6] and card_out[2] == () and card_out[6] > fake_out[6]:
        return f"{op.split('.')[1]}'s reduced result keeps the elementwise loss's storage (Loss.cpp, Loss.cu)"
    return None
