"""Python.TracksIterationsParametersAndOptimizerState: m.iterations, m.track and the result's
breakdown, checked against arithmetic.

The model is one Linear(256, 256) (weight 256*256 + bias 256 float32: 263,168 bytes), trained with
AdamW on a (32, 256) batch (32,768 bytes). AdamW's state after its first step: exp_avg and exp_avg_sq
per parameter (2 * 263,168 = 526,336 bytes); its float32 `step` tensor per parameter (2 * 4 bytes, on cpu
whatever the parameters' device) is host memory beside a GPU's parameters, and oomguard leaves it out on
cpu too (Note [The Python optimizer's step counts]), as on meta. The forward saves the Linear's (32, 256) output for pow()'s backward (32,768 bytes) and
makes the 4-byte loss: 32,772 bytes. The leaking loop also keeps an eval loss with its graph each iteration: the same
32,772 bytes per iteration.
"""
import os
import sys

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])

import torch
from checks import Checks
from torch.profiler import ProfilerActivity, profile

torch.set_num_threads(1)

PARAMETERS = 256 * 256 * 4 + 256 * 4
BATCH = 32 * 256 * 4
ADAMW_STATE = 2 * PARAMETERS
STEP_COUNTS = 2 * 4  # AdamW's `step` tensors, on the host
LOSS = 4
KEPT_GRAPH = 32 * 256 * 4 + LOSS


def train(m, iterations, keep_eval_graphs=False, then=None):
    """The issue's loop, then `then()` with the model still alive; returns the kept eval losses."""
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256).to(m.device)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(32, 256, device=m.device)
    m.track(model, opt)
    history = []
    for _ in m.iterations(iterations):
        with m.phase("forward"):
            loss = model(x).pow(2).mean()
        with m.phase("backward"):
            loss.backward()
        with m.phase("optimizer"):
            opt.step()
            opt.zero_grad()
        if keep_eval_graphs == "through a function":
            with m.phase("eval"):
                history.append(eval_loss(model, x))  # a comment a diagnosis leaves out: "#" in it
        elif keep_eval_graphs:
            with m.phase("eval"):  # the forgotten torch.no_grad(): the graph stays with the loss
                history.append(model(x).pow(2).mean())
    if then is not None:
        then()
    return history


def eval_loss(model, x):
    return model(x).pow(2).mean()


def line_of(text):
    """ "test_loop.py:N (text)": how a diagnosis names the line of this file holding `text`."""
    with open(__file__) as f:
        number = next(i for i, line in enumerate(f, 1) if line.split("  #")[0].strip() == text)
    return f"test_loop.py:{number} ({text})"


class NoPhases:
    """train()'s `m` for the profiler's run: no measurement, the same calls."""

    device = torch.device("cpu")

    def track(self, *things):
        pass

    def iterations(self, n):
        return range(1, n + 1)

    def phase(self, name):
        return __import__("contextlib").nullcontext()


def profiled_peak():
    """Peak live bytes from the profiler's memory events, summed in recorded order."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train(NoPhases(), 3)
    live = peak = 0
    for event in prof.profiler.kineto_results.events():
        if event.name() == "[memory]":
            live += event.nbytes()
            peak = max(peak, live)
    return peak


def main():
    check = Checks()

    train(NoPhases(), 2)  # warm-up: lazy initialisation happens once, before either measurement
    prof_peak = profiled_peak()

    import oomguard

    with oomguard.measure(card="t4", backend="cpu") as m:
        train(m, 3)
    r = m.result
    print(r.describe())
    check("outcome", r.outcome, "pass")
    check("device", m.device, torch.device("cpu"))
    check("breakdown", r.breakdown, {"parameters": PARAMETERS, "gradients": PARAMETERS,
                                     "optimizer_state": ADAMW_STATE, "forward_saved": KEPT_GRAPH})
    steady = PARAMETERS + ADAMW_STATE + BATCH + LOSS  # gradients freed by zero_grad(set_to_none)
    check("live after each iteration", r.live_after_iteration, [steady] * 3)
    check("leak", r.leak, False)
    check("growth per iteration", r.live_growth_per_iteration_bytes, 0.0)
    check("steady state", r.steady_state, "from iteration 2: AdamW keeps state from its first step on")
    # The profiler also counts AdamW's `step` tensors, the 4-byte cast of a wrapped number (AdamW's
    # `exp_avg.mul_(beta)`) and the 8-byte float64 Python's argument parser wraps the step's divisor in
    # (`exp_avg_sq.sqrt() / bias_correction2_sqrt`), live at the peak, which stay on the host on a GPU and
    # which oomguard leaves out (Notes [The Python optimizer's step counts], [Host scalars] and [Python's
    # wrapped numbers]).
    check("peak = profiler's less the host's", r.peak_bytes, prof_peak - STEP_COUNTS - 4 - 8)
    cpu_peak = r.peak_bytes
    check("phases", sorted(r.phase_peak_bytes), ["backward", "forward", "optimizer", "setup", "step"])
    check("warnings", list(r.warnings), [])
    check("no diagnoses", list(r.diagnoses), [])

    # One iteration asked for, with an optimizer that keeps state: two run, as ctx.Iterations() does.
    with oomguard.measure(cap="1GiB") as one:
        train(one, 1)
    check("iterations raised", len(one.result.live_after_iteration), 2)
    check("raised note", one.result.steady_state,
          "2 iterations, not 1: AdamW keeps state from its first step on, so the step that repeats is the second")

    # The kept eval graphs: live bytes grow by the graph's saved output and the loss each iteration.
    with oomguard.measure(card="t4") as leaky:
        kept = train(leaky, 3, keep_eval_graphs=True)
    r = leaky.result
    check("leak", r.leak, True)
    check("growth per iteration", r.live_growth_per_iteration_bytes, float(KEPT_GRAPH))
    check("live after each iteration", r.live_after_iteration,
          [steady + KEPT_GRAPH * i for i in (1, 2, 3)])
    # The C++ detectors watched the Python loop: the forgotten no_grad and the graph it keeps, made at
    # the Python line that made them.
    made = f"MeanBackward0, made in {line_of('history.append(model(x).pow(2).mean())')}"
    check("diagnoses", [(d.kind, d.bytes, d.per, d.where) for d in r.diagnoses],
          [("eval-keeps-graph", KEPT_GRAPH, "phase_end", made),
           ("graph-kept-across-iterations", KEPT_GRAPH, "iteration", made)])
    del kept
    # The fix applied by oomguard (eval_no_grad=True: every eval phase under no_grad): the same loop keeps
    # no graph, and its live bytes stay where the loop without kept losses has them, plus the 4-byte losses.
    with oomguard.measure(card="t4", eval_no_grad=True) as fixed:
        kept = train(fixed, 3, keep_eval_graphs=True)
    check("fixed: no leak of graphs", (fixed.result.live_after_iteration, [d.kind for d in fixed.result.diagnoses]),
          ([steady + 4 * i for i in (1, 2, 3)], ["leak"]))
    check("fixed: grad mode after", torch.is_grad_enabled(), True)
    del kept
    # Made in a function the loop calls: its line, and the loop's line it was called from.
    with oomguard.measure(card="t4") as through:
        kept = train(through, 2, keep_eval_graphs="through a function")
    made = (f"MeanBackward0, made in {line_of('return model(x).pow(2).mean()')}, called from "
            f"{line_of('history.append(eval_loss(model, x))')}")
    check("diagnosis through a function", [(d.kind, d.where) for d in through.result.diagnoses],
          [("eval-keeps-graph", made), ("graph-kept-across-iterations", made)])
    del kept

    # meta: the same loop on shapes: the same categories.
    with oomguard.measure(card="t4", backend="meta") as meta:
        train(meta, 3)
    check("meta device", meta.device, torch.device("meta"))
    check("meta live after = cpu's", meta.result.live_after_iteration, [steady] * 3)
    check("meta breakdown", meta.result.breakdown, {"parameters": PARAMETERS, "gradients": PARAMETERS,
                                                    "optimizer_state": 2 * PARAMETERS,
                                                    "forward_saved": KEPT_GRAPH})

    # An OOM: what was live, by category. AdamW's state is there when the eval batch is refused.
    # The training step's tensors fit; 1 MiB more does not (verdict="allocated": its segments would not fit).
    small = oomguard.measure(cap=str(cpu_peak + 1000), verdict="allocated")

    def past_the_cap():
        with small.phase("eval"):
            torch.empty(1 << 20, dtype=torch.uint8)

    try:
        with small:
            train(small, 2, then=past_the_cap)
    except torch.OutOfMemoryError:
        pass
    o = small.result.oom
    check("oom phase", o.phase if o else None, "eval")
    check("oom live by category", o.live_by_category if o else None,
          {"parameters": PARAMETERS, "gradients": 0, "optimizer_state": ADAMW_STATE, "inputs": 0,
           "activations_and_transient": BATCH + LOSS})

    # Bad input: errors naming the argument and what is accepted.
    check.raises("unknown card", lambda: oomguard.measure(card="t5"), ValueError,
           "oomguard.measure: unknown card 't5'; known cards: t4, l4, a10, a10g, rtx3060, rtx3090, rtx4090, "
           "v100-16gb, v100-32gb, a100-40gb, a100-80gb, h100, h100-pcie, h200, l40s, rtx-a6000 (see `oomguard cards`)")
    check.raises("bad cap", lambda: oomguard.measure(cap="12 parsecs"), ValueError,
           "oomguard.measure: invalid size '12 parsecs': unknown unit 'parsecs'; expected a size such as 16GiB, "
           "15.5GB, 512MiB, 4096 or 1e9 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    check.raises("card and cap", lambda: oomguard.measure(card="t4", cap="1GiB"), ValueError,
           "oomguard.measure: card='t4' and cap='1GiB': give one of them, not both")
    check.raises("bad backend", lambda: oomguard.measure(backend="gpu"), ValueError,
           "oomguard.measure: backend='gpu' is not one of cpu, meta, cuda")
    if not torch.cuda.is_available():  # Note [The cuda backend in Python]
        check.raises("cuda without a GPU", lambda: oomguard.measure(backend="cuda"), ValueError,
                     "oomguard.measure: backend=\"cuda\" needs a GPU, and this torch sees none "
                     "(torch.cuda.is_available() is False): measure on backend=\"cpu\" (exact bytes) or "
                     "backend=\"meta\", kernels=\"cuda\" (the card's CUDA kernels, shapes only, any size)")
    with oomguard.measure() as bad:
        check.raises("iterations(0)", lambda: bad.iterations(0), ValueError,
               "oomguard::MeasureScope: iterations(0): the count must be at least 1")
        check.raises("iterations('3')", lambda: bad.iterations("3"), TypeError,
               "oomguard.measure: iterations(n='3'): n must be an int >= 1")
        check.raises("track(3)", lambda: bad.track(3), TypeError,
               "oomguard: track(int): not a torch.nn.Module, a torch.optim.Optimizer, a tensor, or an iterable of tensors")
        list(bad.iterations(1))
        check.raises("iterations twice", lambda: bad.iterations(1), ValueError,
               "oomguard::MeasureScope: iterations() is called once per measurement: loop over it once")
    check.raises("phase outside", lambda: bad.phase("forward").__enter__(), RuntimeError,
           "oomguard.measure: phase() outside the measurement (inside `with oomguard.measure(...) as m:`)")

    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
