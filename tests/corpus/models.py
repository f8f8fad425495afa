"""Models of the kinds users brought to meta (issue #31, item 5), for tests/meta_corpus.py: each entry is
name -> (a function making the module, the scenario's data[, loop keys]). Scripted at test time."""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


class Bilinear(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)


class UNet(nn.Module):
    """A two-level U-Net: bilinear or transposed-convolution upsampling (kernel 2, or kernel 3 with
    output_padding), skips concatenated, a 1x1 head classifying the pooled map into `classes`."""

    def __init__(self, upsample: str, classes: int = 4):
        super().__init__()
        self.down1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.down2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.bottom = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        if upsample == "transposed":
            self.up = nn.ConvTranspose2d(16, 16, 2, stride=2)
        elif upsample == "transposed_k3":
            self.up = nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1, output_padding=1)
        else:
            self.up = Bilinear()
        self.dec2 = nn.Sequential(nn.Conv2d(32, 8, 3, padding=1), nn.ReLU())
        self.dec1 = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up(b), d2], 1))
        u1 = self.dec1(torch.cat([F.interpolate(u2, scale_factor=2.0, mode="nearest"), d1], 1))
        return self.head(u1).mean((2, 3))


class MaskDropout(nn.Module):
    """A hand-written dropout: a bool mask (1 byte an element) times a bf16 activation."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(16, 64)
        self.last = nn.Linear(64, 4)

    def forward(self, x):
        h = torch.relu(self.first(x)).to(torch.bfloat16)
        if self.training:
            keep = torch.rand(h.shape, device=h.device) > 0.1
            h = h * keep / 0.9
        return self.last(h.to(torch.float32))


class EncoderClassifier(nn.Module):
    """nn.TransformerEncoderLayer over [batch, tokens, 32] features, mean-pooled into 4 classes (post-norm
    with ReLU, or pre-norm with GELU)."""

    def __init__(self, norm_first=False):
        super().__init__()
        self.embed = nn.Linear(8, 32)
        self.layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.1, batch_first=True,
                                                norm_first=norm_first, activation="gelu" if norm_first else "relu")
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.layer(self.embed(x)).mean(1))


class AttentionClassifier(nn.Module):
    """nn.MultiheadAttention self-attention over [batch, tokens, 32] features."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 32)
        self.attention = nn.MultiheadAttention(32, 4, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        h = self.embed(x)
        a, _ = self.attention(h, h, h, need_weights=False)
        return self.head(a.mean(1))


CORPUS = {
    "unet_bilinear": (lambda: UNet("bilinear"), {"batch": 2, "shape": [3, 32, 32], "classes": 4}),
    "unet_bilinear_large": (lambda: UNet("bilinear"), {"batch": 2, "shape": [3, 96, 96], "classes": 4}),
    "unet_transposed": (lambda: UNet("transposed"), {"batch": 2, "shape": [3, 32, 32], "classes": 4}),
    "unet_transposed_k3": (lambda: UNet("transposed_k3"), {"batch": 2, "shape": [3, 32, 32], "classes": 4}),
    "mask_dropout": (MaskDropout, {"batch": 8, "shape": [16], "classes": 4}),
    "encoder_layer": (EncoderClassifier, {"batch": 2, "shape": [6, 8], "classes": 4}),
    "encoder_layer_norm_first": (lambda: EncoderClassifier(norm_first=True), {"batch": 2, "shape": [6, 8], "classes": 4}),
    "multihead_attention": (AttentionClassifier, {"batch": 2, "shape": [6, 8], "classes": 4}),
}
