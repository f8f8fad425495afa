"""The model corpus on a GPU (issue #33 item 4): real models' training steps measured by oomguard.measure on
backend="cuda" (PyTorch's caching allocator on the GPU) against meta as the GPU's card (kernels="cuda" at
OOMGUARD_GPU_CARD, h200 by default: what a CI runner without a GPU would predict) and cpu's kernels on cpu.
Each (model, backend) runs in a process of its own, so that each starts as a fresh process on the card does
(cuBLAS's workspaces, made at a process's first matrix product, in every cuda measurement and held from the
start in card mode's). Writes OUT/corpus.md: per model the ledger's phase peaks and the allocated and
reserved peaks, then every difference past 1% of cuda's number; exit 1 if a cuda measurement could not run.

    python3 ci/gpu_corpus_check.py OUT_DIR             # PYTHONPATH holds the bundle's python/ (ci/gpu_check.sh)
    python3 ci/gpu_corpus_check.py --one MODEL BACKEND  # one measurement, its numbers as JSON (the children)

The models: torchvision's resnet18, mobilenet_v3_small and densenet121 (convolutions on cuDNN, batch norm),
a 4-layer ViT under bf16 autocast (nn.MultiheadAttention, GELU, layer norm), two pre-norm GPT blocks in bf16
with causal scaled_dot_product_attention (flash on sm_80 and later), a TransformerEncoderLayer evaluated
under no_grad (the fused fast path), and a 2-layer LSTM (cuDNN's RNN on the GPU, which card mode warns it
does not model). AdamW steps them (its foreach step on cuda, as card mode picks). The two bf16 models are not
run on cpu (slow there under oomguard's AVX2 cap, and cpu's kernels are not what the GPU check judges).
"""
import json
import os
import sys

from gpu_children import differences, measure_each, run_child

GPU_CARD = os.environ.get("OOMGUARD_GPU_CARD", "h200")  # the preset whose compute capability the GPU has
BACKENDS = {"cpu": dict(card=GPU_CARD, backend="cpu"),
            "meta-card": dict(card=GPU_CARD, backend="meta", kernels="cuda"),
            "cuda": dict(card=GPU_CARD, backend="cuda")}
MODELS = ("resnet18", "mobilenet_v3_small", "densenet121", "vit_bf16", "gpt_bf16", "encoder_eval", "lstm")
# bf16 on cpu's kernels is slow under oomguard's AVX2 cap and compares nothing card mode does not: card mode and cuda only.
NO_CPU = ("vit_bf16", "gpt_bf16")
TOLERANCE = 0.01  # differences past 1% of cuda's number are listed
CHILD_TIMEOUT_S = 60


def build(name, device):
    """(model, inputs, targets or None, autocast dtype or None, evaluation only)."""
    import torch
    from torch import nn
    import torchvision.models as tvm

    torch.manual_seed(0)
    if name in ("resnet18", "mobilenet_v3_small", "densenet121"):
        batch = 8 if name == "densenet121" else 32
        model = getattr(tvm, name)(num_classes=100).to(device)
        return model, torch.randn(batch, 3, 128, 128, device=device), torch.zeros(batch, dtype=torch.long,
                                                                                   device=device), None, False
    if name == "vit_bf16":
        model = tvm.VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=8, hidden_dim=512,
                                      mlp_dim=2048, num_classes=100).to(device)
        return model, torch.randn(16, 3, 224, 224, device=device), torch.zeros(16, dtype=torch.long,
                                                                                device=device), torch.bfloat16, False
    if name == "gpt_bf16":
        block = gpt_block_class()
        model = nn.Sequential(*[block(1024, 16) for _ in range(2)]).to(device, torch.bfloat16)
        x = torch.randn(4, 1024, 1024, device=device, dtype=torch.bfloat16)
        return model, x, None, None, False
    if name == "encoder_eval":
        model = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True).to(device).eval()
        return model, torch.randn(32, 128, 512, device=device), None, None, True
    if name == "lstm":
        model = nn.LSTM(256, 512, 2, batch_first=True).to(device)
        return model, torch.randn(32, 100, 256, device=device), None, None, False
    raise ValueError(f"gpu_corpus_check: no model {name!r}")


def gpt_block_class():
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Block(nn.Module):
        """Pre-norm attention and MLP, as GPT-2's: causal scaled_dot_product_attention, GELU."""

        def __init__(self, width, heads):
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

        def forward(self, x):
            b, s, w = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, w)
            x = x + self.proj(a)
            return x + self.mlp(self.norm2(x))

    return Block


def measure_one(name, backend):
    """One model's step measured in this process: its numbers as a dict."""
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])
    import contextlib
    import torch
    import oomguard

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 4))
    with oomguard.measure(**BACKENDS[backend]) as m:
        model, x, y, autocast, evaluation = build(name, m.device)
        optimizer = None if evaluation else torch.optim.AdamW(model.parameters())
        if optimizer is not None:
            m.track(model, optimizer)
        for _ in m.iterations(2):
            if evaluation:
                with m.phase("eval"), torch.no_grad():
                    model(x)
                continue
            with m.phase("forward"), (m.autocast(autocast) if autocast else contextlib.nullcontext()):
                out = model(x)
                out = out[0] if isinstance(out, tuple) else out
                loss = torch.nn.functional.cross_entropy(out, y) if y is not None else out.float().pow(2).mean()
            with m.phase("backward"):
                loss.backward()
            with m.phase("optimizer"):
                optimizer.step()
                optimizer.zero_grad()
            del out, loss
    r = m.result
    stats = r.cuda if r.cuda is not None else r.cuda_model
    return {"outcome": r.outcome, "peak": r.peak_bytes, "phase_peaks": dict(r.phase_peak_bytes),
            "allocated_peak": stats.allocated_peak_bytes if stats is not None else None,
            "reserved_peak": stats.reserved_peak_bytes if stats is not None else None,
            "warnings": [w[:160] for w in r.warnings]}


def measure_all():
    """Every (model, backend), each in a fresh process: cpu and meta beside each other, cuda one at a time."""
    keys = [(m, b) for m in MODELS for b in BACKENDS if not (b == "cpu" and m in NO_CPU)]
    return keys, measure_each(keys, lambda m, b: run_child(__file__, ["--one", m, b], CHILD_TIMEOUT_S),
                              lambda k: k[1] == "cuda")


def table(keys, results):
    """(Markdown lines, whether every cuda measurement ran)."""
    lines = [f"The corpus on the GPU against card mode ({GPU_CARD}'s kernels) and cpu's kernels "
             "(ci/gpu_corpus_check.py):", "",
             "| model | backend | outcome | ledger peak | allocated peak | reserved peak | phase peaks | warnings |",
             "|---|---|---|---|---|---|---|---|"]
    cuda_ran = True
    for m, b in keys:
        r = results[(m, b)]
        if "error" in r:
            lines.append(f"| {m} | {b} | error: {r['error'].replace('|', '/')} | | | | | |")
            cuda_ran = cuda_ran and b != "cuda"
            continue
        phases = ", ".join(f"{p} {v}" for p, v in sorted(r["phase_peaks"].items()))
        warned = "; ".join(r["warnings"]).replace("|", "/")[:200]
        lines.append(f"| {m} | {b} | {r['outcome']} | {r['peak']} | {r['allocated_peak']} | {r['reserved_peak']} | "
                     f"{phases} | {warned} |")
    lines += ["", f"Differences past {TOLERANCE:.0%} of cuda's number (card mode's own; cpu's through the "
              "allocator model):", ""]
    listed = 0
    for m in MODELS:
        cuda = results[(m, "cuda")]
        if "error" in cuda:
            lines.append(f"- {m}: no cuda numbers ({cuda['error'][:120]})")
            continue
        for b in ("meta-card", "cpu"):
            other = results.get((m, b), {"error": "not measured"})
            if "error" in other:
                continue
            found = differences(f"{m}, {b}", cuda, other, TOLERANCE)
            lines += found
            listed += len(found)
    if listed == 0 and cuda_ran:
        lines.append("- none")
    return lines, cuda_ran


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    keys, results = measure_all()
    lines, cuda_ran = table(keys, results)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "corpus.md"), "w") as f:
        f.write(text)
    print(text)
    print("corpus: the cuda measurements ran" if cuda_ran else
          "corpus: some cuda measurements did not run: see the errors above")
    return 0 if cuda_ran else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        print(json.dumps(measure_one(sys.argv[2], sys.argv[3])))
        sys.exit(0)
    sys.exit(main())
