"""Python.CardModeMatchesFakeCuda: every aten op card mode runs (oomguard.measure(backend="meta",
kernels="cuda")) gives the outputs PyTorch's own fake CUDA tensors give (issue #33, item 3).

torch 2.11's FakeTensorMode makes tensors on device "cuda" without a GPU (meta tensors that say cuda,
run through torch/_meta_registrations.py and the fake kernels), and runs forwards on them; a backward
does not run (the autograd engine asks the driver: "hasPrimaryContext expects a valid device index, but
got device_index=0"), nor does nn.Module.to("cuda") of a fake module ("_apply(): Couldn't swap
Conv2d.weight"). So:

1. Card mode runs the corpus's models (tests/corpus/models.py, four of torchvision's) and the op families
   a card's Meta kernels mirror (dropout, bf16 layer norm, the three attention backends by card, dtype,
   mask, dropout and causal padding, embedding's backward, cuDNN convolution, fp16/bf16 batch norm,
   batch norm's backends (cuDNN for fp32 and fp16 with float parameters, native otherwise), group norm,
   pooling, interpolation, mixed-dtype arithmetic, bf16 mean, cross entropy, the other losses, AdamW's foreach step, the
   other Reduce.cuh reductions: var/std, norms, amax, max, argmax, prod, any/all) for a training step at
   sm_75, sm_89, sm_80 and sm_90, and nn.MultiheadAttention's fused fast path (_native_multi_head_attention
   in evaluation, by dtype, weights and padding mask), under a TorchDispatchMode that records each
   aten op's arguments and outputs (shape, stride, storage offset, dtype, device, storage bytes). A
   second process that never loads oomguard (its Meta kernels, once registered, would answer the fake
   tensors too) replays every distinct call under FakeTensorMode on cuda: the outputs must be equal,
   but for the fake kernels' known imprecisions (known_imprecision, each with the CUDA source that
   says which is the card's).
2. That process also runs each forward without attention (fake tensors have no compute capability and
   take math) or an optimizer (fake parameters take AdamW's for-loop step) on fake cuda tensors: card
   mode on a T4 must run the same aten ops in the same order, cudnn_batch_norm where fake CUDA's
   _select_batch_norm_backend picks cuDNN.
3. Flash's forward bytes on an A100 and each card's attention backend are checked exactly.

What this cannot see: the allocations a kernel makes and frees inside itself (flash's split-KV and dQ
accumulators, mem-efficient's workspace, embedding's sort buffers): fake kernels make outputs only.
Those stay checked against the sources by hand (tests/card_attention_test.cpp, card_kernels_test.cpp).
"""
import os
import pickle
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def spec_of(t):
    """A tensor's layout as a card has it: meta is the card ("cuda"); cpu tensors stay on the host."""
    device = "cuda" if t.device.type in ("meta", "cuda") else t.device.type
    return ("T", device, tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype,
            t.untyped_storage().nbytes())


def freeze(x):
    """Arguments and outputs as picklable, comparable values (tensors by spec_of)."""
    if isinstance(x, torch.Tensor):
        return spec_of(x)
    if isinstance(x, (list, tuple)):
        return tuple(freeze(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((k, freeze(v)) for k, v in x.items()))
    if isinstance(x, torch.device):
        return ("D", "cuda" if x.type in ("meta", "cuda") else x.type)
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return x.node.maybe_as_int() if isinstance(x, torch.SymInt) else x
    if isinstance(x, (torch.dtype, torch.memory_format, torch.layout, int, float, bool, str, type(None))):
        return x
    if isinstance(x, torch.Generator):
        return None
    raise TypeError(f"cannot record an argument of type {type(x).__name__}: {x!r}")


import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "corpus"))
import models as corpus_models  # noqa: E402  (tests/corpus/models.py)
import fake_cuda_fast_path  # noqa: E402  (the fused attention fast path's cases)
import fake_cuda_losses  # noqa: E402  (the losses' case)

class Recorder(TorchDispatchMode):
    """Each aten op's name, arguments and outputs, in order."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace == "profiler":  # record_function's markers (an optimizer's step): no tensors
            return out
        recorded = dict(kwargs)
        # A factory without a dtype makes the default dtype, which build() may have set: say which.
        if recorded.get("dtype") is None and isinstance(out, torch.Tensor) and \
                any(a.name == "dtype" for a in func._schema.arguments) and \
                not any(isinstance(a, torch.Tensor) for a in args):
            recorded["dtype"] = out.dtype
        self.calls.append((str(func), freeze(args), freeze(recorded), freeze(out)))
        return out


def build(make, device, dtype=None):
    """A module made on `device` in `dtype` (made there, not moved: fake tensors cannot be swapped into
    an existing module's parameters)."""
    previous = torch.get_default_dtype()
    with torch.device(device):
        if dtype is not None:
            torch.set_default_dtype(dtype)
        try:
            return make()
        finally:
            torch.set_default_dtype(previous)


def corpus_cases():
    """tests/corpus/models.py's models and four of meta_corpus.py's torchvision models: each case runs
    the forward of a training step and returns its loss."""
    import torchvision.models as tvm

    models = dict(corpus_models.CORPUS)
    models["resnet18"] = (lambda: tvm.resnet18(num_classes=10), {"batch": 2, "shape": [3, 64, 64], "classes": 10})
    models["mobilenet_v3_small"] = (lambda: tvm.mobilenet_v3_small(num_classes=10),
                                    {"batch": 2, "shape": [3, 64, 64], "classes": 10})
    models["densenet121"] = (lambda: tvm.densenet121(num_classes=10), {"batch": 2, "shape": [3, 64, 64], "classes": 10})
    models["vit_tiny"] = (lambda: tvm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                        hidden_dim=32, mlp_dim=64, num_classes=10),
                          {"batch": 2, "shape": [3, 32, 32], "classes": 10})

    def run(make, data):
        def case(device):
            model = build(make, device)
            model.train()
            x = torch.randn(data["batch"], *data["shape"], device=device)
            y = torch.randint(0, data["classes"], (data["batch"],), device=device)
            return F.cross_entropy(model(x), y)
        return case

    return {name: run(make, data) for name, (make, data) in models.items()}


def attention(dtype, s=256, d=64, mask=False, dropout=0.0, causal=False):
    def case(device):
        q, k, v = (torch.randn(2, 4, s, d, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
        m = torch.zeros(s, s, device=device, dtype=dtype) if mask else None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=dropout, is_causal=causal).sum()
    return case


def gpt_layer_bf16(device):
    """A bf16 decoder block: embedding, layer norm, attention, dropout, GELU MLP, cross entropy."""
    vocab, b, s, h = 512, 2, 2048, 64
    emb, ln, qkv, mlp, head = build(lambda: (
        nn.Embedding(vocab, h), nn.LayerNorm(h), nn.Linear(h, 3 * h),
        nn.Sequential(nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h), nn.Dropout(0.1)), nn.Linear(h, vocab)),
        device, torch.bfloat16)
    ids = torch.randint(0, vocab, (b, s), device=device)
    x = emb(ids)
    q, k, v = qkv(ln(x)).view(b, s, 3, 4, h // 4).permute(2, 0, 3, 1, 4)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True).transpose(1, 2).reshape(b, s, h)
    x = x + F.dropout(a, 0.1, training=True)
    x = x + mlp(ln(x))
    return F.cross_entropy(head(x).float().view(-1, vocab), ids.view(-1)) + x.mean()


def norms_pools_half(device):
    """fp16 batch norm, channels-last group norm, pools with indices (channels-last adaptive max pooling,
    max_pool1d without gradients), interpolation, mixed dtypes, mse_loss."""
    x = torch.randn(2, 8, 16, 16, device=device, dtype=torch.half, requires_grad=True)
    bn, gn = build(lambda: (nn.BatchNorm2d(8), nn.GroupNorm(2, 8)), device, torch.half)
    y = gn(bn(x).contiguous(memory_format=torch.channels_last))
    p, _ = F.max_pool2d(y, 2, return_indices=True)
    p = F.adaptive_avg_pool2d(p, 4) + F.avg_pool2d(p, 2) + F.adaptive_max_pool2d(p, 4)
    u = F.interpolate(p, scale_factor=2.0, mode="bilinear") + F.interpolate(p, scale_factor=2.0, mode="nearest")
    keep = torch.rand(u.shape, device=device) > 0.1
    with torch.no_grad():  # off the cpu, max_pool1d is max_pool1d_with_indices even without gradients
        q = F.max_pool1d(torch.randn(2, 8, 16, device=device, dtype=torch.half), 2)
    return ((u * keep).mean() + (u.float() + u).mean() + u.to(torch.bfloat16).mean() + q.mean()
            + F.mse_loss(u, torch.zeros_like(u)))


def batch_norm_reduced(device):
    """Batch norm on fp16 and bf16 inputs (float statistics on a card), contiguous and channels-last,
    an evaluation forward of each, then a training one."""
    loss = 0
    for dtype in (torch.half, torch.bfloat16):
        for memory_format in (torch.contiguous_format, torch.channels_last):
            bn = build(lambda: nn.BatchNorm2d(8), device, dtype)
            x = torch.randn(2, 8, 6, 6, device=device, dtype=dtype).contiguous(memory_format=memory_format)
            bn.eval()
            with torch.no_grad():
                bn(x)
            bn.train()
            loss = loss + bn(x.requires_grad_()).sum()
    return loss


def batch_norm_backends(device):
    """Batch norm where _select_batch_norm_backend picks cuDNN (fp32 contiguous, channels-last and 3-d,
    training and evaluation, no running statistics; fp16 with float parameters) and where it does not
    (no affine parameters, 2-d, fp16 parameters)."""
    loss = 0
    for shape, memory_format in (((2, 8, 6, 6), torch.contiguous_format), ((2, 8, 6, 6), torch.channels_last),
                                 ((2, 8, 5), torch.contiguous_format), ((2, 8), torch.contiguous_format),
                                 ((2, 8, 2, 3, 3), torch.channels_last_3d)):
        bn = build(lambda: nn.BatchNorm1d(8) if len(shape) < 4 else
                   nn.BatchNorm2d(8) if len(shape) == 4 else nn.BatchNorm3d(8), device)
        x = torch.randn(*shape, device=device).contiguous(memory_format=memory_format)
        bn.eval()
        with torch.no_grad():
            bn(x)
        bn.train()
        loss = loss + bn(x.requires_grad_()).sum()
    x = torch.randn(2, 8, 6, 6, device=device, requires_grad=True)
    plain = build(lambda: nn.BatchNorm2d(8, affine=False), device)
    unstated = build(lambda: nn.BatchNorm2d(8, track_running_stats=False), device)
    loss = loss + plain(x).sum() + unstated(x).sum()
    w, b = (torch.randn(8, device=device, requires_grad=True) for _ in range(2))
    stats = (torch.zeros(8, device=device), torch.ones(8, device=device))
    for dtype, params in ((torch.half, (w, b)), (torch.half, (w.half(), b.half()))):
        xh = torch.randn(2, 8, 6, 6, device=device, dtype=dtype, requires_grad=True)
        loss = loss + F.batch_norm(xh, *stats, *params, training=True).float().sum()
    return loss


def conv_half_channels_last(device):
    channels_last = {"device": device, "dtype": torch.half}
    w = torch.randn(16, 8, 3, 3, **channels_last).contiguous(memory_format=torch.channels_last).requires_grad_()
    x = torch.randn(2, 8, 16, 16, **channels_last).contiguous(memory_format=torch.channels_last).requires_grad_()
    bias = torch.zeros(16, **channels_last, requires_grad=True)
    conv1d = build(lambda: nn.Conv1d(8, 8, 3), device)
    return F.conv2d(x, w, bias, padding=1).sum() + conv1d(torch.randn(2, 8, 20, device=device)).sum()


def embedding_small(device):
    emb = build(lambda: nn.Embedding(100, 16), device)
    return emb(torch.randint(0, 100, (4, 8), device=device)).sum()


def adamw_step(device):
    """An AdamW step (its foreach ops on a card: Note [PyTorch's Python choices for CUDA tensors]) over
    gradients given by hand, then a forward."""
    model = build(lambda: nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)), device)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    return model(torch.randn(8, 32, device=device)).sum()


def reductions(device):
    """The Reduce.cuh reductions besides sum and mean, in fp32 and bf16 (meta_kernels_reduce_ops.cpp,
    meta_kernels_reduce_moments.cpp; var and std have no C++ Meta kernel in PyTorch)."""
    loss = 0
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(256, 64, device=device, dtype=dtype, requires_grad=True)
        v, m = torch.var_mean(x, 0)
        s, _ = torch.std_mean(x, 1, keepdim=True)
        loss = loss + (x.var() + x.std(0).sum() + v.sum() + m.sum() + s.sum()).float()
        loss = loss + torch.linalg.vector_norm(x, dtype=torch.float32) + x.norm(2).float()
        loss = loss + (x.amax(0).sum() + x.amin() + x.max(1).values.sum() + x.max()).float()
        with torch.no_grad():  # prod's backward and the index reductions: data-dependent or not differentiable
            rest = (x.prod(0).sum() + sum(t.sum() for t in torch.aminmax(x, dim=0)) + x.argmax() + x.argmin(1).sum() + (x > 0).any(0).sum() + (x > 0).all()).float()
        loss = loss + rest
    return loss


def all_cases():
    """The op families card mode mirrors (attention by dtype, mask, dropout and causal padding) and the
    corpus's models: each case(device) runs a forward and returns the loss to differentiate."""
    cases = {
        "gpt_layer_bf16": gpt_layer_bf16,
        "norms_pools_half": norms_pools_half,
        "batch_norm_reduced": batch_norm_reduced,
        "batch_norm_backends": batch_norm_backends,
        "conv_half_channels_last": conv_half_channels_last,
        "embedding_small": embedding_small,
        "losses": fake_cuda_losses.losses,
        "adamw_step": adamw_step,
        "reductions": reductions,
    }
    for dtype in (torch.half, torch.bfloat16, torch.float32):
        n = str(dtype).removeprefix("torch.")
        cases[f"sdpa_{n}"] = attention(dtype)
        cases[f"sdpa_{n}_mask"] = attention(dtype, mask=True)
        cases[f"sdpa_{n}_dropout"] = attention(dtype, dropout=0.1)
        cases[f"sdpa_{n}_s200_d60_causal"] = attention(dtype, s=200, d=60, causal=True)
    cases.update(fake_cuda_fast_path.cases(build))
    cases.update(corpus_cases())
    return cases


# ---------------------------------------------------------------------------------------------------
# The fake side: a process that never imports oomguard.

def thaw(x):
    if isinstance(x, tuple) and x and x[0] == "T":
        _, device, shape, stride, offset, dtype, nbytes = x
        itemsize = torch.empty((), dtype=dtype, device="meta").element_size()
        base = torch.empty((nbytes + itemsize - 1) // itemsize, dtype=dtype, device=device)
        return base.as_strided(shape, stride, offset)
    if isinstance(x, tuple) and x and x[0] == "D":
        return torch.device(x[1])
    if isinstance(x, tuple):
        return [thaw(v) for v in x]
    return x


def op_of(name):
    namespace, packet, overload = name.split(".") if name.count(".") == 2 else (*name.split("."), "default")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


def replay(calls):
    """Each (op, args, kwargs) under FakeTensorMode on cuda: its frozen outputs, or the error's text."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    results = []
    for name, args, kwargs in calls:
        try:
            with FakeTensorMode():
                a = [thaw(v) for v in args]
                k = {key: thaw(v) for key, v in kwargs}
                results.append(("ok", freeze(op_of(name)(*a, **k))))
        except Exception as e:  # noqa: BLE001 - reported per op
            results.append(("error", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
    return results


def forward_ops(names):
    """Each named case's forward on fake cuda tensors: the aten ops it runs, in order. (Its backward
    cannot run without a GPU: the autograd engine asks the CUDA driver for a context.)"""
    from torch._subclasses.fake_tensor import FakeTensorMode

    cases = all_cases()
    sequences = {}
    for name in names:
        rec = Recorder()
        with FakeTensorMode():
            with rec:
                cases[name](torch.device("cuda"))
        sequences[name] = [c[0] for c in rec.calls]
    return sequences


if __name__ == "__main__" and sys.argv[1:] == ["--fake"]:
    calls, names = pickle.load(sys.stdin.buffer)
    pickle.dump((replay(calls), forward_ops(names), fake_cuda_fast_path.encoder_layer_on_fake_cuda(build)), sys.stdout.buffer)
    raise SystemExit(0)

# ---------------------------------------------------------------------------------------------------
# The card side.

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])
import oomguard  # noqa: E402
from checks import Checks  # noqa: E402

torch.set_num_threads(1)
check = Checks()

CARDS = {"t4": 75, "l4": 89, "a100-40gb": 80, "h100": 90}
# Ops fake tensors cannot run by design: their results are data (meta's item() reads 0).
DATA_DEPENDENT = {"aten._local_scalar_dense.default"}


def record(card, case):
    """The case's forward and backward in card mode: its calls, and how many of them the forward made."""
    rec = Recorder()
    with oomguard.measure(backend="meta", kernels="cuda", card=card) as m:
        with rec:
            loss = case(m.device)
            forward = len(rec.calls)
            if loss is not None:  # the fast-path cases run in evaluation under no_grad
                loss.backward()
    return rec.calls, forward


# Every card runs the op cases (attention's backend follows the card); the models run on t4 and h100.
CASES = all_cases()
MODELS = set(corpus_cases())
calls = []  # (case, card, op, args, kwargs, card mode's outputs)
forwards = {}  # (case, card) -> the forward's op names
for card in CARDS:
    for name, case in CASES.items():
        if name in MODELS and card not in ("t4", "h100"):
            continue
        recorded, forward = record(card, case)
        forwards[(name, card)] = [op for op, *_ in recorded[:forward]]
        calls.extend((name, card, op, args, kwargs, out) for op, args, kwargs, out in recorded)

# The forwards whose ops fake CUDA must run alike: all but attention's, where fake tensors (no compute
# capability) take math, which card mode takes only for bf16 on sm_75 (compared below).
ATTENTION = {"gpt_layer_bf16", "encoder_layer", "encoder_layer_norm_first", "multihead_attention", "vit_tiny"}
# Nor AdamW's: a card's parameters take the foreach step, but torch/optim/optimizer.py
# _default_to_fused_or_foreach asks `type(p) in _foreach_supported_types`, which a FakeTensor (a subclass)
# is not, so fake CUDA takes the for-loop step (the foreach ops' outputs are still compared above).
same_forward = [n for n in CASES if not n.startswith("sdpa_") and n not in ATTENTION | {"adamw_step"}]
same_forward.append("sdpa_bfloat16")

# Distinct calls only: the same op with the same arguments and card-mode outputs is replayed once.
distinct = {}
for name, card, op, args, kwargs, out in calls:
    distinct.setdefault((op, args, kwargs, out), (name, card))
keys = [k for k in distinct if k[0] not in DATA_DEPENDENT]
replayed = [(op, args, kwargs) for op, args, kwargs, _ in keys]
fake = subprocess.run([sys.executable, os.path.abspath(__file__), "--fake"],
                      input=pickle.dumps((replayed, same_forward)), capture_output=True, check=False)
if fake.returncode != 0:
    print(fake.stderr.decode())
    raise SystemExit(1)
results, fake_forwards, encoder_layer_error = pickle.loads(fake.stdout)
# cuDNN's batch norm as card mode runs it (its outputs are compared below with the other ops'). Its
# reserve space, fourth output, is empty on both sides: fake CUDA's decomposition makes it so
# (torch/_decomp/decompositions.py cudnn_batch_norm: input.new_zeros((0,), dtype=torch.uint8)), card
# mode books none (Note [cuDNN's batch norm reserve space is not modelled]); a card's is what
# cudnnGetBatchNormalizationTrainingExReserveSpaceSize says, which neither can ask without a GPU.
cudnn_outputs = [k[3] for k in keys if k[0] == "aten.cudnn_batch_norm.default"]
check("card mode ran cudnn_batch_norm", len(cudnn_outputs) > 0, True)
check("cuDNN reserve bytes in card mode's cudnn_batch_norm", sorted({out[3][6] for out in cudnn_outputs}), [0])


def contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.insert(0, step)
        step *= max(size, 1)
    return tuple(strides)


def known_imprecision(op, args, card_out, fake_out):
    """A difference that is the fake kernel's, not card mode's: which, and the source that says so."""
    if op == "aten._scaled_dot_product_efficient_attention.default":
        # attention.cu _efficient_attention_forward: outside graph capture the philox seed and offset are
        # made on the host (at::empty({}, at::dtype(at::kLong)) without dropout, at::scalar_tensor(...,
        # at::dtype(at::kLong)) with it); _meta_registrations.py's meta__scaled_dot_product_efficient_attention
        # makes them on the query's device.
        if card_out[:2] == fake_out[:2] and card_out[2][1] == "cpu" and fake_out[2][1] == "cuda":
            return "mem-efficient's philox seed and offset are host tensors on a card (attention.cu)"
    if op == "aten._native_multi_head_attention.default":
        return fake_cuda_fast_path.weights_imprecision(card_out, fake_out)
    if op in fake_cuda_losses.REDUCED_KEEP_STORAGE:
        return fake_cuda_losses.reduced_loss_imprecision(op, card_out, fake_out)
    if op == "aten.native_batch_norm_backward.default":
        # cuda/Normalization.cu batch_norm_elementwise_backward_train, General path (a channels-last input
        # with a grad_out in another layout, such as .sum()'s expanded gradient): grad_input is made in the
        # input's suggested format (at::empty(..., grad_out.options().memory_format(input.suggest_memory_format())),
        # PR #107270); _decomp's native_batch_norm_backward leaves CUDA's strides contiguous.
        grad, fake_grad, input_strides = card_out[0], fake_out[0], args[1][3]
        if card_out[1:] == fake_out[1:] and grad[:3] == fake_grad[:3] and grad[4:] == fake_grad[4:] and \
                grad[3] == input_strides and fake_grad[3] == contiguous_strides(grad[2]):
            return "batch norm's General backward keeps the input's memory format (cuda/Normalization.cu)"
    return None


by_op = {}
differing, imprecise, errors = [], [], []
for key, (status, fake_out) in zip(keys, results):
    op, args, kwargs, card_out = key
    where = distinct[key]
    by_op.setdefault(op, 0)
    by_op[op] += 1
    if status == "error":
        errors.append((op, where, fake_out))
    elif fake_out != card_out:
        why = known_imprecision(op, args, card_out, fake_out)
        (imprecise if why else differing).append((op, where, args, card_out, fake_out, why))

print(f"{len(calls)} calls recorded, {len(distinct)} distinct, {len(keys)} replayed, {len(by_op)} ops")
for op, count in sorted(by_op.items()):
    print(f"  {op}: {count}")
for op, where, args, card_out, fake_out, why in imprecise:
    print(f"fake kernel imprecision, {op} ({where[0]} on {where[1]}): {why}")
for op, where, args, card_out, fake_out, _ in differing:
    print(f"DIFFERS {op} ({where[0]} on {where[1]})\n  args {args}\n  card {card_out}\n  fake {fake_out}")
for op, where, error in errors:
    print(f"FAKE ERROR {op} ({where[0]} on {where[1]}): {error}")
check("ops whose outputs differ from fake CUDA's", sorted({d[0] for d in differing}), [])
check("ops fake CUDA could not run", sorted({e[0] for e in errors}), [])


# The forwards op by op: card mode on a T4 runs the ops fake CUDA runs, cudnn_batch_norm included (a
# card takes it for fp32 inputs and fp16 ones with float parameters: Normalization.cpp
# _select_batch_norm_backend, which fake CUDA tensors run as a card does).
def comparable(ops):
    ops = [op for op in ops if not op.startswith("prim.") and op != "aten.detach.default"]  # no allocation
    # torch.tensor(0) (BatchNorm's num_batches_tracked) reaches a fake card through the dispatcher
    # (lift_fresh, then _to_copy from the host); on meta it is made below it. 8 bytes of module set-up.
    return [op for i, op in enumerate(ops) if op != "aten.lift_fresh.default" and
            not (op == "aten._to_copy.default" and i > 0 and ops[i - 1] == "aten.lift_fresh.default")]


cudnn_batch_norms = 0
for name in same_forward:
    cudnn_batch_norms += fake_forwards[name].count("aten.cudnn_batch_norm.default")
    card_ops, fake_ops = comparable(forwards[(name, "t4")]), comparable(fake_forwards[name])
    if card_ops != fake_ops:
        first = next((i for i, (c, f) in enumerate(zip(card_ops, fake_ops)) if c != f),
                     min(len(card_ops), len(fake_ops)))
        print(f"FORWARD DIFFERS {name}: card mode {len(card_ops)} ops, fake {len(fake_ops)}; from op {first}: "
              f"card {card_ops[first:first + 4]}, fake {fake_ops[first:first + 4]}")
    check(f"forward ops of {name} (t4) as fake CUDA's", card_ops == fake_ops, True)
print(f"{len(same_forward)} forwards compared; fake CUDA ran cudnn_batch_norm {cudnn_batch_norms} times, "
      "card mode as often")
fake_cuda_fast_path.check_fast_path(check, same_forward, forwards, fake_forwards, encoder_layer_error)

def outputs_of(card, case_name, op):
    return [out for name, c, o, _, _, out in calls if name == case_name and c == card and o == op]


# Exact bytes (tests/card_attention_test.cpp): flash on an A100, fp16, B2 H4 S256 D64: out 262,144 B,
# logsumexp [2, 4, 256] float 8,192 B, rng_state [2] uint64 16 B, an empty debug mask; and fake CUDA
# says the same (the comparison above).
flash = outputs_of("a100-40gb", "sdpa_float16", "aten._scaled_dot_product_flash_attention.default")
check("flash forwards on an A100 (fp16)", len(flash), 1)
out, lse, _, _, _, _, rng, unused, debug = flash[0]
check("flash out", (out[2], out[3], out[6]), ((2, 4, 256, 64), (65536, 16384, 64, 1), 262144))
check("flash logsumexp", (lse[2], lse[5], lse[6]), ((2, 4, 256), torch.float32, 8192))
check("flash rng_state", (rng[1], rng[2], rng[5], rng[6]), ("cuda", (2,), torch.uint64, 16))
check("flash debug mask", (debug[2], debug[6]), ((0,), 0))
# Which backend each card's chooser took for fp16 without a mask: mem-efficient below sm_80, flash on
# sm_80/sm_89, cuDNN on sm_90 (cuda_sdp_choice.cpp).
for card, want in (("t4", "efficient"), ("l4", "flash"), ("a100-40gb", "flash"), ("h100", "cudnn")):
    ran = sorted({op for name, c, op, *_ in calls if name == "sdpa_float16" and c == card and "_scaled_dot" in op
                  and "backward" not in op})
    check(f"attention backend on {card} (fp16)", ran, [f"aten._scaled_dot_product_{want}_attention.default"])
raise SystemExit(check.exit_code())
