"""Writes the TorchScript files the tests load (tests/torchscript_test.cpp) into OUT, and the
examples' models with their scenario files into OUT/examples (examples/pytorch-model/).

    make_fixtures.py OUT

Generated at test time (a CTest fixture), never committed: TorchScript files are binaries tied to
the torch that wrote them, and this is the pinned one.
"""
import os
import shutil
import subprocess
import sys
import warnings
import zipfile
from typing import Dict, List, Tuple

import torch
import torch.nn as nn


class MLP(nn.Module):
    """The layers of seq_mlp.pt, as a plain module: no segments."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(16, 32)
        self.act = nn.ReLU()
        self.last = nn.Linear(32, 4)

    def forward(self, x):
        return self.last(self.act(self.first(x)))


class DictOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(16, 4)

    def forward(self, x) -> Dict[str, torch.Tensor]:
        y = self.body(x)
        return {"logits": y, "features": x}


class TwoInputs(nn.Module):
    """forward(ids [batch, seq], mask [batch, seq] bool) -> [batch, seq, 8]."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.out = nn.Linear(8, 8)

    def forward(self, ids, mask):
        return self.out(self.embed(ids) * mask.unsqueeze(-1).to(torch.float32))


class NoTensor(nn.Module):
    def forward(self, x) -> List[int]:
        return x.shape


class KeepsHistory(nn.Module):
    """A pitfall in the user's own code: the forward keeps every hidden activation for later analysis,
    with its autograd graph (tests/diagnose_test.cpp's TorchScript case)."""

    history: List[torch.Tensor]

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(16, 32)
        self.last = nn.Linear(32, 4)
        self.history = []

    def forward(self, x):
        h = torch.relu(self.first(x))
        self.history.append(h)
        return self.last(h)


class LstmTagger(nn.Module):
    """Token ids [batch, seq] -> tags [batch, seq, 4] through a 2-layer LSTM, whose forward reads its
    parameters from `_flat_weights`, a List[Tensor] attribute (Note [Tensors a module holds beyond
    its parameters], nn/torchscript/torchscript_net.cpp). lstm.json trains it; the eager check compares it."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.lstm = nn.LSTM(16, 8, num_layers=2, batch_first=True)
        self.head = nn.Linear(8, 4)

    def forward(self, ids):
        hidden, _ = self.lstm(self.embed(ids))
        return self.head(hidden)


class GruTagger(nn.Module):
    """LstmTagger with a GRU: cpu computes every step's input projection at once, meta per step."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.gru = nn.GRU(16, 8, batch_first=True)
        self.head = nn.Linear(8, 4)

    def forward(self, ids):
        hidden, _ = self.gru(self.embed(ids))
        return self.head(hidden)


class AttentionTagger(nn.Module):
    """Self-attention over the embedded tokens (nn.MultiheadAttention, batch first): in evaluation under
    no_grad cpu and meta both take its fused fast path."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, ids):
        h = self.embed(ids)
        a, _ = self.attention(h, h, h, need_weights=False)
        return self.head(a)


class EncoderTagger(nn.Module):
    """Two nn.TransformerEncoderLayers (post-norm with ReLU, pre-norm with GELU; padding, token 0, masked
    in the first) and an nn.MultiheadAttention asked for its weights, over the embedded tokens: in
    evaluation under no_grad cpu and meta both take their fused fast path."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.post_norm = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
        self.pre_norm = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=True, activation="gelu")
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, ids):
        padding = ids == 0
        h = self.pre_norm(self.post_norm(self.embed(ids), src_key_padding_mask=padding))
        a, weights = self.attention(h, h, h, key_padding_mask=padding)
        assert weights is not None
        return self.head(a * weights.sum(-1, keepdim=True))


class TensorAttributes(nn.Module):
    """Tensors its forward reads from attributes that are neither parameters nor buffers: a plain
    tensor, and one inside a tuple inside a dict."""

    shifts: Dict[str, Tuple[torch.Tensor, int]]

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(16, 4)
        self.scale = torch.full((4,), 0.5)
        self.shifts = {"shift": (torch.ones(4), 1)}

    def forward(self, x):
        shift, _ = self.shifts["shift"]
        return self.body(x) * self.scale + shift


class SkipMlp(nn.Module):
    """A skip connection held in locals, trained with an MSE loss (no classes; skip_mse.json): Python
    keeps `skip` and `hidden` until the forward returns, the TorchScript interpreter frees them after
    the sum, their last use; autograd saves neither (the eager check's known difference, Note
    [Python keeps a forward's locals] in tests/pytorch_eager_check.py)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 64)
        self.mid = nn.Linear(64, 64)
        self.out = nn.Linear(64, 16)

    def forward(self, x):
        skip = self.inp(x)
        hidden = self.mid(torch.relu(skip))
        return self.out(hidden + skip)


class Segmenter(nn.Module):
    """Images [batch, 3, 8, 8] -> per-pixel logits [batch, 5, 8, 8], PyTorch's layout for cross_entropy
    (classes on dim 1, targets [batch, 8, 8]); not an nn.Sequential. segmenter.json trains it; the eager
    check compares it."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.classify = nn.Conv2d(8, 5, 1)

    def forward(self, x):
        return self.classify(torch.relu(self.conv(x)))


def seq_mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def rewrite_archive(source, target, change):
    """Copies the TorchScript archive `source` to `target` with one record changed: change(name, data)
    gets each record's name below the archive's folder ("data.pkl", "code/...") and returns its new
    bytes. The broken files users bring (tests/torchscript_test.cpp's defects D19, D20 and D33)."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zout:
        folder = os.path.splitext(os.path.basename(target))[0]
        for info in zin.infolist():
            name = info.filename.split("/", 1)[1]
            zout.writestr(folder + "/" + name, change(name, zin.read(info)))


def replaced(record, old, new):
    """A change for rewrite_archive: `old` replaced by `new` in `record`, which must hold it."""

    def change(name, data):
        if name != record:
            return data
        assert old in data, (record, old)
        return data.replace(old, new, 1)

    return change


# The attribute `history` of keeps_history.pt, an empty List[Tensor], as data.pkl pickles it.
HISTORY_LIST = b"ctorch.jit._pickle\nbuild_tensorlist\nq\x04(](etR"


def write_broken_archives(out):
    seq, history = os.path.join(out, "seq_mlp.pt"), os.path.join(out, "keeps_history.pt")
    container = "code/__torch__/torch/nn/modules/container.py"
    broken = {
        # D20: code LibTorch cannot compile, a class it does not know.
        "syntax_error.pt": (seq, replaced(container, b"input: Tensor) -> Tensor:", b"input: Tensor -> Tensor:")),
        "unknown_op.pt": (seq, replaced(container, b"return (_2).forward(input1, )", b"return torch.no_such_op(input1)")),
        "global_os_system.pt": (seq, replaced("data.pkl", b"ccollections\nOrderedDict\n", b"cos\nsystem\n")),
        # D19: a list that holds itself, and lists nested 100000 deep, where `history` was.
        "self_list.pt": (history, replaced("data.pkl", HISTORY_LIST, b"]q\xc8h\xc8a")),
        "deep_list.pt": (history, replaced("data.pkl", HISTORY_LIST, b"]" * 100000 + b"a" * 99999)),
        # D33: a weight's record cut to 10 bytes; a byte order this machine does not have.
        "short_record.pt": (seq, lambda name, data: data[:10] if name == "data/0" else data),
        "big_endian.pt": (seq, lambda name, data: b"big" if name == "byteorder" else data),
    }
    for name, (source, change) in broken.items():
        rewrite_archive(source, os.path.join(out, name), change)
    return len(broken)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    saved = {
        "seq_mlp.pt": torch.jit.script(seq_mlp()),
        "not_sequential.pt": torch.jit.script(MLP()),
        "dict_output.pt": torch.jit.script(DictOutput()),
        "two_inputs.pt": torch.jit.script(TwoInputs()),
        "no_tensor.pt": torch.jit.script(NoTensor()),
        "keeps_history.pt": torch.jit.script(KeepsHistory()),
        "lstm.pt": torch.jit.script(LstmTagger()),
        "gru.pt": torch.jit.script(GruTagger()),
        "attention.pt": torch.jit.script(AttentionTagger()),
        "encoder.pt": torch.jit.script(EncoderTagger()),
        "tensor_attributes.pt": torch.jit.script(TensorAttributes()),
        "skip_mse.pt": torch.jit.script(SkipMlp()),
        "segmenter.pt": torch.jit.script(Segmenter()),
        "traced_dropout.pt": torch.jit.trace(nn.Sequential(nn.Linear(16, 4), nn.Dropout(0.5)).train(),
                                             torch.randn(2, 16), check_trace=False),
    }
    with torch.device("meta"):
        saved["meta_mlp.pt"] = torch.jit.script(seq_mlp())
    for name, module in saved.items():
        module.save(os.path.join(out, name))
    for scenario in ("lstm.json", "skip_mse.json", "segmenter.json"):
        shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), scenario), out)
    with open(os.path.join(out, "not_a_module.pt"), "w") as f:
        f.write("this is not a zip archive")
    broken = write_broken_archives(out)

    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "pytorch-model")
    target = os.path.join(out, "examples")
    os.makedirs(target, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(examples, "make_models.py"), "--out", target], check=True)
    for name in os.listdir(examples):
        if name.endswith(".json"):
            shutil.copy(os.path.join(examples, name), target)
    print(f"wrote {len(saved) + 1 + broken} fixtures to {out} and the examples to {target}")


if __name__ == "__main__":
    main()
