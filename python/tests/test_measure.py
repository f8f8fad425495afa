"""Python.MeasuresAPlainLoopExactly: oomguard.measure books a plain PyTorch loop to the byte.

A small MLP's training (forward, backward, SGD step, zero_grad) on cpu, on one thread, measured twice:
by PyTorch's own profiler (profile_memory=True: the allocator's allocation and free events, summed in
order into live bytes) before oomguard is installed, then by oomguard.measure, whose tracking
allocator then serves the same calls. The peaks and the allocation counts must be equal; an
allocation past the cap raises torch.OutOfMemoryError; and the process holds one torch. Then the same
for the catalog's forgotten-no-grad loop in Python (examples/python/mlp_eval.py: Adam, and an
evaluation that keeps its outputs, without and with torch.no_grad()).
"""
import os
import subprocess
import sys

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])

import torch
from checks import Checks
from test_loop import NoPhases
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
import mlp_eval  # noqa: E402

torch.set_num_threads(1)


def train(phase=None):
    phase = phase or (lambda name: __import__("contextlib").nullcontext())
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    for _ in range(2):
        with phase("forward"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            opt.step()
        with phase("zero_grad"):
            opt.zero_grad()
    return loss.item()


def profiled(run=train):
    """Peak live bytes and allocation count from the profiler's memory events, in recorded order."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    live = peak = allocs = 0
    for event in prof.profiler.kineto_results.events():
        if event.name() != "[memory]":
            continue
        live += event.nbytes()
        peak = max(peak, live)
        allocs += event.nbytes() > 0
    return peak, allocs, live


def main():
    check = Checks()

    train()  # warm-up: lazy initialisation happens once, before either measurement
    prof_peak, prof_allocs, prof_left = profiled()
    print(f"profiler: peak {prof_peak} bytes, {prof_allocs} allocations, {prof_left} left live")
    mlp_eval.train(NoPhases(), no_grad=True)
    prof_mlp = {no_grad: profiled(lambda: mlp_eval.train(NoPhases(), no_grad)) for no_grad in (False, True)}

    import oomguard  # importing it installs the tracking allocators (oomguard/workload.h)

    with oomguard.measure(cap="1GiB", backend="cpu") as m:
        train(m.phase)
    r = m.result
    print(r.describe())
    check("outcome", r.outcome, "pass")
    check("peak_bytes", r.peak_bytes, prof_peak)
    check("alloc_count", r.alloc_count, prof_allocs)
    check("phase peaks' max", max(r.phase_peak_bytes.values()), r.peak_bytes)
    check("phases", sorted(r.phase_peak_bytes), ["backward", "forward", "optimizer", "setup", "zero_grad"])
    check("tracking allocators installed", oomguard._core.tracking_allocators_installed(), True)

    # The same loop as a decorated function: the same numbers.
    measured = oomguard.measure(cap="1GiB")
    measured(train)()
    check("decorator peak_bytes", measured.result.peak_bytes, prof_peak)

    # PyTorch's profiler inside a measurement: its memory events come from oomguard's allocator now
    # (Note [The profiler's memory events]), and say what the measurement says, allocation by allocation.
    with oomguard.measure(cap="1GiB") as both:
        inside = profiled(lambda: train(both.phase))
    check("profiler inside: peak, allocations, left live", inside,
          (both.result.peak_bytes, both.result.alloc_count, prof_left))

    # The catalog's loop with its evaluation: the profiler's peak less Adam's `step` counts, kept graphs
    # or not: a 0-dim float32 cpu tensor per parameter, on the host beside a GPU's parameters, which
    # oomguard leaves out (Note [The Python optimizer's step counts]). The profiler also records the
    # 4-byte casts of wrapped numbers (Adam's `exp_avg_sq.mul_(beta2)`), host scalars oomguard leaves out
    # too (Note [Host scalars]): more allocations, none live at the peak.
    for no_grad, name in ((False, "kept graphs"), (True, "under no_grad")):
        with oomguard.measure(card="t4") as mlp:
            opt = mlp_eval.train(mlp, no_grad)
        steps = [state["step"] for state in opt.state.values()]
        check(f"mlp_eval {name}: a float32 step count per parameter", [(s.dim(), s.dtype) for s in steps],
              [(0, torch.float32)] * len(list(opt.param_groups[0]["params"])))
        del opt
        peak, allocs, left = prof_mlp[no_grad]
        print(f"profiler, mlp_eval {name}: peak {peak} bytes, {allocs} allocations, {left} left live")
        check(f"mlp_eval {name}: peak_bytes = the profiler's less the step counts", mlp.result.peak_bytes,
              peak - sum(s.nbytes for s in steps))
        check(f"mlp_eval {name}: fewer allocations than the profiler's", mlp.result.alloc_count < allocs, True)

    # Past the cap: torch.OutOfMemoryError, as on a GPU; the measurement says where. The tensors' bytes
    # (verdict="allocated"): the model's 2 MiB segment would refuse the first (test_reserved_verdict.py).
    oom = oomguard.measure(cap="1MiB", verdict="allocated")
    raised = None
    try:
        with oom:
            with oom.phase("forward"):
                kept = torch.empty(512 * 1024, dtype=torch.uint8)
                torch.empty(1024 * 1024, dtype=torch.uint8)
    except Exception as e:  # noqa: BLE001 - which one is the point
        raised = e
    check("raised", type(raised).__name__, "OutOfMemoryError")
    check("is torch.OutOfMemoryError", isinstance(raised, torch.OutOfMemoryError), True)
    check("outcome past the cap", oom.result.outcome, "oom")
    check("refused request", oom.result.oom.requested_bytes, 1024 * 1024)
    check("live when refused", oom.result.oom.live_bytes, 512 * 1024)
    check("phase when refused", oom.result.oom.phase, "forward")
    check("what was live, as repr() writes it", repr(oom.result.oom),
          "out of memory in forward: 1024.00 KiB (1048576 bytes) requested with 512.00 KiB (524288 bytes) live: "
          "parameters 0 bytes, gradients 0 bytes, optimizer state 0 bytes, inputs 0 bytes, "
          "activations and transients 512.00 KiB")
    print("message:", str(raised).splitlines()[0])

    # meta: shapes only, any size.
    with oomguard.measure(backend="meta", card="t4") as meta:
        torch.empty(1 << 30, dtype=torch.uint8, device="meta")
    check("meta peak", meta.result.peak_bytes, 1 << 30)
    # A value asked of a meta tensor: PyTorch's error, and a note of what to do instead.
    notes = None
    try:
        with oomguard.measure(backend="meta") as no_values:
            torch.ones(3, device=no_values.device).sum().item()
    except RuntimeError as e:
        notes = getattr(e, "__notes__", None)
    check("a note on .item() on meta", notes, ["oomguard.measure(backend=\"meta\"): meta tensors have shapes and no "
                                               "values, so .item(), printing a tensor or a branch on its value cannot "
                                               "run there: where the loop keeps a number, sum into a tensor "
                                               "(total += loss.detach()); where library code branches on data (a "
                                               "mask that is all ones), say what it would read: with "
                                               "m.assume(True): ...; or measure on backend=\"cpu\" (exact "
                                               "bytes, real values)"])
    check("its outcome", no_values.result.outcome, "error:error")
    # Note [A value assumed on meta]: inside m.assume(value) a read gives the value in the tensor's dtype,
    # allocating nothing, and says nothing of unmirrored kernels; outside it PyTorch's error stands.
    with oomguard.measure(backend="meta") as assumed:
        mask = torch.ones(2, 8, dtype=torch.long, device=assumed.device)
        with assumed.assume(True):
            reads = (bool((mask == 1).all()), mask.sum().item(), mask.float().mean().item())
            with assumed.assume(0):
                inner = bool(mask.any())
            after_inner = bool(mask.all())
        try:
            bool(mask.all())
            outside = "no error"
        except RuntimeError as e:
            outside = str(e)
    check("assumed reads: bool, int, float", (reads, inner, after_inner), ((True, 1, 1.0), False, True))
    check("outside assume(): PyTorch's error", outside, "Tensor.item() cannot be called on meta tensors")
    check("assume(): no warning that a Python Meta kernel ran",
          [w for w in assumed.result.warnings if "_local_scalar_dense" in w], [])
    with oomguard.measure(backend="cpu") as on_cpu:
        with on_cpu.assume(True):
            real = torch.zeros(3).sum().item()  # cpu has values: assume() changes nothing
    check("assume() on cpu reads the real value", real, 0.0)
    with oomguard.measure(backend="meta") as typed:
        check.raises("assume() takes a number", lambda: typed.assume("yes"), TypeError,
                     "oomguard.measure: assume(value='yes'): a bool, int or float")
    check.raises("assume() outside the measurement", lambda: on_cpu.assume(True), RuntimeError,
                 "oomguard.measure: assume() outside the measurement (inside `with oomguard.measure(...) as m:`)")

    # nn.Embedding(padding_idx=...) fills its padding row through a view made under no_grad; the detectors
    # asked that view for its grad_fn as the op ended, which PyTorch refuses for such a view, and RecordFunction
    # printed the refusal with a C++ backtrace to stderr for every such fill (every NLP model's embedding).
    # In a child, whose stderr is read: nothing printed, the measurement passes.
    snippet = ("import torch, oomguard\n"
               "with oomguard.measure(backend='cpu') as m:\n"
               "    e = torch.nn.Embedding(10, 4, padding_idx=0)\n"
               "    for _ in m.iterations(1):\n"
               "        e(torch.zeros(2, dtype=torch.long)).sum().backward()\n"
               "print(m.result.outcome)\n")
    child = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    check("an embedding with a padding row: outcome", child.stdout.strip(), "pass")
    check("... and no exception in a RecordFunction callback on stderr",
          "Exception in RecordFunction callback" in child.stderr, False)

    # One torch: the module bound to the libraries `import torch` loaded, not copies of its own.
    with open("/proc/self/maps") as maps:
        c10 = {line.split()[-1] for line in maps if line.rstrip().endswith("/libc10.so")}
    check("libc10.so files mapped", len(c10), 1)

    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
