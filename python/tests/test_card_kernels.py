"""Python.MetaAsACard: oomguard.measure(backend="meta", kernels="cuda") mirrors a card's CUDA kernels
(README, "Meta as a card: --kernels cuda"; backends/meta/kernel_target.h).

AdamW's step: foreach in card mode, as PyTorch picks it for cuda tensors, for-loop on cpu's kernels.
A bf16 dropout's saved bytes: cuda's native_dropout keeps a 1-byte mask beside the output, cpu's
composite a noise tensor in bf16 (2 bytes an element). The measurement says whose kernels ran, the
target is the card's (t4: sm_75, h100: sm_90; a cap alone: sm_80, with a warning), and kernels= with
another backend is refused.
"""
import os

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])

import oomguard
import torch
from checks import Checks, train_sum

torch.set_num_threads(1)
check = Checks()


def dropout(**kwargs):
    """A training bf16 dropout of 1000 elements (x made in setup, the dropout in forward), measured."""
    with oomguard.measure(backend="meta", **kwargs) as m:
        x = torch.empty(1000, dtype=torch.bfloat16, device=m.device, requires_grad=True)
        with m.phase("forward"):
            y = torch.nn.functional.dropout(x, 0.1, training=True)
        del x, y
    return m.result


cpu = dropout(card="t4")
cuda = dropout(card="t4", kernels="cuda")
check("kernels (default)", cpu.kernels, "cpu")
check("kernels (t4)", cuda.kernels, "cuda sm_75")
# At the peak, what the forward allocated: output and noise (2 + 2 bytes an element), or output and mask (2 + 1).
check("forward's bytes, cpu's kernels", dict(cpu.live_at_peak_by_phase)["forward"], 4000)
check("forward's bytes, cuda's kernels", dict(cuda.live_at_peak_by_phase)["forward"], 3000)
check("kernels (h100)", dropout(card="h100", kernels="cuda").kernels, "cuda sm_90")
capped = dropout(cap="1GiB", kernels="cuda")
check("kernels (a cap)", capped.kernels, "cuda sm_80")
check("a cap's warning", any("sm_80" in w for w in capped.warnings), True)
check.raises("kernels with cpu", lambda: oomguard.measure(backend="cpu", kernels="cuda"), ValueError,
             "oomguard.measure: kernels='cuda' needs backend=\"meta\" (backend='cpu' runs its own kernels)")
check.raises("an unknown kernels", lambda: oomguard.measure(backend="meta", kernels="gpu"), ValueError,
             "oomguard.measure: kernels='gpu' is not one of cpu, cuda")


# Note [PyTorch's Python choices for CUDA tensors]: AdamW picks its foreach step for cuda tensors, and in
# card mode for meta ones; on cpu's kernels, its for-loop step. Eight Linear(256, 256): W = 262,144 bytes
# a weight, B = 1,024 a bias, P = 8 (W + B) the parameters.
W, B = 256 * 256 * 4, 256 * 4
P = 8 * (W + B)


def adamw(kernels, foreach=None):
    with oomguard.measure(card="t4", backend="meta", kernels=kernels) as m:
        model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]).to(m.device)
        train_sum(m, model, torch.optim.AdamW(model.parameters(), foreach=foreach), torch.randn(4, 256, device=m.device))
    return m.result


card, cpu_kernels = adamw("cuda"), adamw("cpu")
# Between iterations: the parameters, AdamW's two moments, the batch and the 4-byte loss (its `step`
# tensors stay on the host); the step adds the gradients, then its temporaries.
before_step = P + 2 * P + 4 * 256 * 4 + 4 + P
check("live after each iteration", card.live_after_iteration, [before_step - P] * 2)
# foreach: exp_avg_sq.sqrt() of every parameter at once (divided and added to in place): P more.
check("card mode: the foreach step's peak", card.phase_peak_bytes["optimizer"], before_step + P)
check("card mode = foreach=True", adamw("cuda", foreach=True).phase_peak_bytes["optimizer"], before_step + P)
# for-loop: one weight's sqrt() and its quotient, while the previous parameter's (a bias's) denom lives on.
check("cpu's kernels: the for-loop step's peak", cpu_kernels.phase_peak_bytes["optimizer"], before_step + 2 * W + B)
check("card mode, foreach=False kept", adamw("cuda", foreach=False).phase_peak_bytes["optimizer"],
      before_step + 2 * W + B)
check("the choice ends with the measurement", adamw("cpu").phase_peak_bytes["optimizer"], before_step + 2 * W + B)


# clip_grad_norm_ asks torch/utils/_foreach_utils.py's list: in card mode it runs _foreach_norm, as on a GPU,
# whose CUDA kernel's buffers card mode does not model: said in the warnings; on cpu's kernels nothing is said.
def clipped(kernels):
    with oomguard.measure(backend="meta", kernels=kernels, card="t4") as m:
        model = torch.nn.Linear(512, 512).to(m.device)
        for _ in m.iterations(1):
            model(torch.empty(4, 512, device=m.device)).sum().backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    return [w.split(" (")[0] for w in m.result.warnings if w.startswith("aten::_foreach_norm")]


check("clip_grad_norm_ in card mode: _foreach_norm, said", clipped("cuda"), ["aten::_foreach_norm"])
check("clip_grad_norm_ on cpu's kernels: nothing said", clipped(None), [])
raise SystemExit(check.exit_code())
