"""Python.MetaEqualsCpu: the user's own loop on meta books what it books on cpu, to the byte, and the
Meta kernel that runs each op is the one the C++ tool runs (Note [Which Meta kernel runs in Python],
python/oomguard/meta_kernels.py).

1. Which kernel wins: before a meta measurement, torch/_meta_registrations.py's Python kernels run
   relu, addmm (oomguard has its own of both: addmm is LibTorch's shape function and the operand copies
   cpu's kernel makes, meta_kernels_matmul.cpp) and uniform_ (PyTorch has a C++ one); from the first meta measurement on, oomguard's and PyTorch's C++ kernels
   do, and an op with only a Python kernel keeps it and the measurement warns that it ran.
2. nn.Linear's init (uniform_) and its forward under no_grad (addmm) allocate on meta what they do on cpu.
3. The catalog's forgotten-no-grad loop (examples/python/mlp_eval.py), both variants: peak, phase
   peaks, live bytes after each iteration and the breakdown equal cpu's. (Adam's `step` tensors, cpu
   tensors beside meta or cuda parameters, torch.tensor(0.0) in torch/optim/adam.py, are host memory on
   both: Note [The Python optimizer's step counts]; so are the float64 0-dim tensors Python's argument
   parser wraps numbers in, the step's divisor among them: Note [Python's wrapped numbers].)
4. The GPT-2 example (examples/python/gpt2_validation.py, the fix): the same, the 8-byte numbers of
   GPT-2's tanh GELU (0.5 * x, ...), which the backward's MulBackward0 nodes save, host memory on both.
5. Where they must differ: a model made in float32 on the host and cast to bf16 in setup holds both on
   cpu (one memory) and the copy only on meta, and cpu says so.
6. Small modules trained a step under bf16 autocast (convolutions, linear, layer norm, a layer scale, pooling):
   autocast's casts in ATen's order and a bf16 sum's float buffer, as cpu makes them; the buffer's bytes exact.
7. A Hugging Face BERT trained under bf16 autocast (the math attention in float).
"""
import os
import sys

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])

import torch
from checks import Checks

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
import mlp_eval  # noqa: E402

torch.set_num_threads(1)

import oomguard  # noqa: E402
from oomguard import meta_kernels  # noqa: E402

# An op with a Python and an oomguard Meta kernel, two with a Python and a PyTorch C++ one, one with
# only a Python one (nn.PReLU's).
OPS = ("aten::relu", "aten::addmm", "aten::uniform_", "aten::_prelu_kernel")


def kernels():
    return {op: meta_kernels.kernel_of(op) for op in OPS}


def kernel_warnings(result):
    """The warnings on Meta kernels (these measurements run no m.iterations(n), which is warned about too)."""
    return [w for w in result.warnings if "Meta kernels" in w]


def check_winners(check):
    check("before a meta measurement: torch's Python Meta kernels", kernels(),
          {op: "torch-python" for op in OPS})
    with oomguard.measure(backend="meta") as m:
        x = torch.empty(4, 3, device=m.device)
        torch.nn.functional.prelu(x, torch.empty(1, device=m.device))
    check("from the first meta measurement on: the C++ tool's", kernels(),
          {"aten::relu": "oomguard", "aten::addmm": "oomguard", "aten::uniform_": "pytorch-c++",
           "aten::_prelu_kernel": "torch-python"})
    check("an op on torch's Python Meta kernel is warned about", kernel_warnings(m.result),
          ["aten::_prelu_kernel ran on torch's Python Meta kernels (torch/_meta_registrations.py; LibTorch "
           "has none), which meta does not mirror yet: their bytes on meta are not cpu's. Run it on cpu "
           "for exact bytes"])
    with oomguard.measure(backend="meta") as m:
        torch.relu(torch.empty(4, device=m.device))
    check("a measurement without one has no such warning", kernel_warnings(m.result), [])


def linear(device):
    """nn.Linear(512, 512)'s init (uniform_ on weight and bias) and a forward of 512 rows under no_grad."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(512, 512, device=device)
    x = torch.empty(512, 512, device=device)
    with torch.no_grad():
        y = layer(x)
    return layer, x, y


def measured(train, backend, **options):
    with oomguard.measure(card="t4", backend=backend) as m:
        kept = train(m, **options)
    return m.result, kept


def compare_loop(check, name, cpu, meta):
    """meta = cpu, to the byte."""
    check(f"{name}: phase peaks on meta = cpu's", dict(meta.phase_peak_bytes), dict(cpu.phase_peak_bytes))
    check(f"{name}: peak", (meta.peak_bytes, meta.peak_phase), (cpu.peak_bytes, cpu.peak_phase))
    check(f"{name}: live after each iteration", list(meta.live_after_iteration),
          list(cpu.live_after_iteration))
    check(f"{name}: breakdown", meta.breakdown, cpu.breakdown)
    check(f"{name}: diagnoses", [(d.kind, d.bytes) for d in meta.diagnoses], [(d.kind, d.bytes) for d in cpu.diagnoses])
    check(f"{name}: warnings", list(meta.warnings), list(cpu.warnings))


def main():
    check = Checks()
    check_winners(check)

    def run_linear(m):
        return linear(m.device)

    cpu, kept = measured(run_linear, "cpu")
    del kept
    meta, kept = measured(run_linear, "meta")
    del kept
    print(f"nn.Linear: cpu {cpu.describe()}\nmeta {meta.describe()}")
    check("nn.Linear's init and forward: peak and allocations on meta = cpu's",
          (meta.peak_bytes, meta.alloc_count), (cpu.peak_bytes, cpu.alloc_count))
    check("... = weight, bias, input and output, nothing more", meta.peak_bytes, (3 * 512 * 512 + 512) * 4)

    for name, no_grad in (("pitfall", False), ("fixed", True)):
        cpu, opt = measured(mlp_eval.train, "cpu", no_grad=no_grad)
        del opt
        meta, opt = measured(mlp_eval.train, "meta", no_grad=no_grad)
        del opt
        print(f"{name}: cpu {cpu.describe()}\nmeta {meta.describe()}")
        compare_loop(check, name, cpu, meta)

    # 5. Note [The cpu backend's host is its device] (run/in_process_measure.cpp): a model made in float32
    #    and cast by .to(device, bfloat16) in setup. cpu: the float32 weight and bias (1024 x 1024 x 4 +
    #    1024 x 4 = 4,198,400) live while the weight's bf16 copy (2,097,152) is made: 6,295,552. meta: the
    #    float32 model is host memory; the bf16 copies are all the device holds: 2,097,152 + 2,048.
    def cast_model(m):
        model = torch.nn.Linear(1024, 1024).to(m.device, torch.bfloat16)
        for _ in m.iterations(1):
            with m.phase("forward"):
                model(torch.ones(1, 1024, device=m.device, dtype=torch.bfloat16))
        return model

    host_note = "the peak is in setup, where the cpu backend's host and device are one memory"
    cpu, kept = measured(cast_model, "cpu")
    del kept
    meta, kept = measured(cast_model, "meta")
    del kept
    check("a float32 model cast in setup: cpu's setup peak holds both",
          (cpu.phase_peak_bytes["setup"], cpu.peak_phase), (4_198_400 + 2_097_152, "setup"))
    check("... and cpu says so", [w[:len(host_note)] for w in cpu.warnings if w.startswith(host_note)], [host_note])
    check("... meta's holds the bf16 copies only", meta.phase_peak_bytes["setup"], 2_097_152 + 2_048)
    check("... and says nothing", [w for w in meta.warnings if w.startswith("the peak is in setup")], [])
    m = oomguard.measure(cap="5MiB", verdict="allocated", backend="cpu")  # 6,295,552 > 5 MiB
    try:
        with m:
            cast_model(m)
    except torch.OutOfMemoryError:
        pass
    oom_note = "the out of memory is in setup, where the cpu backend's host and device are one memory"
    check("... past a 5 MiB cap cpu's OOM in setup says so too",
          (m.result.oom.phase if m.result.oom else None, [w[:len(oom_note)] for w in m.result.warnings if w.startswith(oom_note)]),
          ("setup", [oom_note]))

    import gpt2_validation

    cpu, _ = measured(gpt2_validation.train, "cpu", detach=True)
    meta, _ = measured(gpt2_validation.train, "meta", detach=True)
    print(f"gpt2: cpu {cpu.describe()}\nmeta {meta.describe()}")
    compare_loop(check, "gpt2", cpu, meta)

    # 6. Small modules trained a step under bf16 autocast (Notes [Autocast casts the last argument first],
    #    meta_autocast.cpp, and [A reduced-precision sum's float buffer on cpu], meta_kernels_reduce.cpp: a
    #    1x1 convolution's backward peaked 64,640 bytes under cpu's on meta, a Linear's 256 over it).
    for name, make, shape in SMALL_MODULES:
        cpu, _ = measured(small_step, "cpu", make=make, shape=shape)
        meta, _ = measured(small_step, "meta", make=make, shape=shape)
        check(f"{name} under bf16 autocast: phase peaks on meta = cpu's", dict(meta.phase_peak_bytes),
              dict(cpu.phase_peak_bytes))

    # A bf16 sum over two innermost-reduced dimensions on cpu sums a float copy into a float result: x [2, 32,
    # 16, 16] float (65,536), its bf16 copy (32,768), the float copy (65,536) and float result [32] (128),
    # the bf16 result (64).
    def bias_like_sum(m, **_):
        x = torch.ones(2, 32, 16, 16, device=m.device)
        for _ in m.iterations(1):
            with m.phase("forward"):
                y = x.bfloat16().sum([0, 2, 3])
        return y

    for backend in ("cpu", "meta"):
        r, _ = measured(bias_like_sum, backend)
        check(f"a bf16 sum over [0, 2, 3] on {backend}: its float buffer", r.phase_peak_bytes["forward"],
              65_536 + 32_768 + 65_536 + 128 + 64)
    # 7. A Hugging Face BERT (last: transformers keeps a few host tensors alive, which a later cpu
    #    measurement would count) trained under bf16 autocast: its attention dropout sends scaled_dot_product_attention
    #    to the math path, which computes bf16 in float on cpu (Note [The math attention computes in float on cpu
    #    too], meta_kernels_attention.cpp: meta was 4.5 MiB under cpu here). HF's mask helper asks whether the
    #    all-ones mask is all ones: m.assume(True) on meta says what cpu reads.
    cpu, _ = measured(bert_step, "cpu")
    meta, _ = measured(bert_step, "meta")
    print(f"bert: cpu {cpu.describe()}\nmeta {meta.describe()}")
    compare_loop(check, "bert under bf16 autocast", cpu, meta)

    return check.exit_code()


def _layer_scaled():
    class LayerScaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gamma, self.linear = torch.nn.Parameter(torch.ones(64)), torch.nn.Linear(64, 64)

        def forward(self, x):
            return self.gamma * self.linear(x)

    return LayerScaled()


SMALL_MODULES = (
    ("conv 1x1 with bias", lambda: torch.nn.Conv2d(16, 32, 1), (2, 16, 16, 16)),
    ("conv 3x3", lambda: torch.nn.Conv2d(16, 32, 3, padding=1), (2, 16, 16, 16)),
    ("linear", lambda: torch.nn.Linear(64, 128), (2, 10, 64)),
    ("layer norm, linear, gelu",
     lambda: torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 128), torch.nn.GELU()), (2, 10, 64)),
    ("layer scale", _layer_scaled, (2, 10, 64)),
    ("conv 1x1, adaptive average pool",
     lambda: torch.nn.Sequential(torch.nn.Conv2d(16, 16, 1), torch.nn.AdaptiveAvgPool2d(1)), (2, 16, 13, 13)),
)


def small_step(m, make, shape):
    """One step of `make()` under m.autocast(bf16): forward, a float sum, backward."""
    torch.manual_seed(0)
    model = make().to(m.device)
    x = torch.ones(*shape, device=m.device)
    for _ in m.iterations(1):
        with m.phase("forward"), m.autocast(torch.bfloat16):
            loss = model(x).float().sum()
        with m.phase("backward"):
            loss.backward()
    return model


def bert_step(m):
    """Two training steps of a 2-layer BertForSequenceClassification (hidden 256) under m.autocast(bf16), AdamW."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=2, hidden_size=256, num_attention_heads=4, intermediate_size=1024)
    with torch.device(m.device):
        model = BertForSequenceClassification(config)
    optimizer = torch.optim.AdamW(model.parameters())
    m.track(model, optimizer)
    ids = torch.zeros(4, 128, dtype=torch.long, device=m.device)
    mask = torch.ones(4, 128, dtype=torch.long, device=m.device)
    labels = torch.zeros(4, dtype=torch.long, device=m.device)
    for _ in m.iterations(2):
        with m.phase("forward"), m.autocast(torch.bfloat16), m.assume(True):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        with m.phase("backward"):
            loss.backward()
        with m.phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad()
    return optimizer


if __name__ == "__main__":
    sys.exit(main())
