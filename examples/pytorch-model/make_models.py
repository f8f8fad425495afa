"""Scripts the example models to TorchScript files that oomguard scenarios load (model.torchscript).

    python make_models.py              # writes cnn.pt, gpt.pt and llm-7b.pt next to this script
    python make_models.py --out DIR    # or into DIR

cnn.pt     a small ResNet-style CNN (convolution, batch norm, ReLU, pooling, linear) as an
           nn.Sequential of blocks, so checkpointing and the per-layer knobs can act between them
gpt.pt     a nanoGPT-style decoder (token and position embeddings, causal attention through
           scaled_dot_product_attention, GELU MLP, layer norm, tied output weights)
llm-7b.pt  the same decoder at 7B shape (4096 wide, 32 layers), bfloat16, built on the meta device:
           a file of a few hundred KB that stands for 13 GiB of weights

The classes are importable (the independent check, tests/pytorch_eager_check.py, trains the same
models in eager PyTorch). Needs only torch.
"""
import argparse
import math
import os
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    """conv-bn-relu-conv-bn plus the input (a 1x1 convolution when the shape changes), then relu."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


def resnet_cnn(classes: int = 10, width: int = 16) -> nn.Sequential:
    """A ResNet-style CNN for [3, 32, 32] images: stem, three blocks, pooled head."""
    return nn.Sequential(
        nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                      nn.MaxPool2d(2)),
        BasicBlock(width, width),
        BasicBlock(width, 2 * width, stride=2),
        BasicBlock(2 * width, 4 * width, stride=2),
        nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * width, classes)),
    )


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class DecoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """nanoGPT's decoder: forward(ids [batch, seq]) -> logits [batch, seq, vocab]."""

    def __init__(self, vocab: int, seq: int, dim: int, layers: int, heads: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList([DecoderBlock(dim, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as nanoGPT and GPT-2 do

    def forward(self, ids):
        positions = torch.arange(ids.size(1), device=ids.device)
        x = self.wte(ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


SMALL_GPT = dict(vocab=512, seq=64, dim=64, layers=2, heads=4)
GPT_7B = dict(vocab=32000, seq=2048, dim=4096, layers=32, heads=32)


def save(module: nn.Module, path: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.script's deprecation notice (see the README)
        torch.jit.script(module).save(path)
    print(f"wrote {path} ({os.path.getsize(path) / 1024:.0f} KiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="folder for the .pt files")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    save(resnet_cnn(), os.path.join(args.out, "cnn.pt"))
    save(GPT(**SMALL_GPT), os.path.join(args.out, "gpt.pt"))
    with torch.device("meta"):
        big = GPT(**GPT_7B).to(torch.bfloat16)
    save(big, os.path.join(args.out, "llm-7b.pt"))


if __name__ == "__main__":
    main()
