"""Checks oomguard's cpu numbers for a TorchScript scenario against eager PyTorch: the same training,
written in eager PyTorch from the module's Python class (cpu, one thread) and measured from the
profiler's memory events, against `oomguard run --backend cpu`.

    python pytorch_eager_check.py [--out DIR] OOMGUARD FOLDER SCENARIO VARIANT [SCENARIO VARIANT]...
    EAGER_CHECK_MODELS="net.pt=/path/net.py:Net" python pytorch_eager_check.py ...   # your own model

Run it with the Python whose torch oomguard was built with (ci/bootstrap.sh's venv). FOLDER holds
the scenario files and the .pt files they name; SCENARIO is a file name in FOLDER. The example
models (examples/pytorch-model/make_models.py: cnn.pt, gpt.pt) are known; any other .pt needs its
Python class in EAGER_CHECK_MODELS (a .pt name, a Python file, a callable that builds the module the
.pt was scripted from; several separated by commas). For each scenario and variant the check prints
the peak, each phase's peak and the allocation count of both sides; a difference is either itemised
with its known cause (and then does not fail the check) or DIFFERENT. oomguard's results file goes to
a temporary folder, or to --out: nothing is written into FOLDER.

Exit codes: 0 every row the same or a known difference, 1 a DIFFERENT row, 2 bad input (a missing
file, an unknown variant, a model without its Python class, a scenario the check does not mirror).

How the eager side mirrors oomguard's loop (workload/workload.cpp, VariantRun): parameters and
buffers exist before the profiler starts (oomguard makes them in its setup phase: one allocation
each); host batches are drawn before it too (oomguard draws them in host memory, outside the
ledger) and each step copies its batch to the "device" (torch.empty_like(host).copy_(host)); a
module's cross_entropy targets are drawn after its forward, shaped like the output without the
class axis (dim 1, or the last for token ids); each step's batch, output and loss die at the end of
its backward, each evaluation batch's at the end of that batch. Phases are record_function ranges named "phase:<name>".
"""
import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import warnings

# As oomguard does (Note [One oneDNN ISA on every machine], allocators/install.h): oneDNN capped at
# AVX2 before torch loads, so eager takes the kernels oomguard's cpu backend takes on this machine.
if "ONEDNN_MAX_CPU_ISA" not in os.environ and "DNNL_MAX_CPU_ISA" not in os.environ:
    os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"

import torch  # noqa: E402
import torch.nn.functional as F
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile, record_function

class BadInput(Exception):
    """Input the check cannot take: the message names the file or key and what was expected (exit 2)."""


# The scenario keys the eager side mirrors, and those it accepts at their default only.
MIRRORED = {"model.torchscript", "seed", "data.batch", "data.shape", "data.dtype", "data.vocab", "data.classes",
            "loop.iterations", "loop.loss", "loop.autocast", "loop.optimizer.kind", "loop.optimizer.lr",
            "loop.optimizer.momentum", "loop.optimizer.weight_decay", "loop.eval.batches", "loop.eval.no_grad",
            "loop.eval.keep_outputs", "loop.loss_history.from", "loop.loss_history.keep",
            "pitfalls.inplace.layer", "pitfalls.inplace.op", "pitfalls.checkpoint.preserve_rng_state"}
AT_DEFAULT = {"data.on_host": True, "loop.backward": True, "loop.retain_graph": False, "loop.zero_grad": "none",
              "loop.accumulate": 1, "pitfalls.inplace.target": "none", "pitfalls.retain_grad": False,
              "pitfalls.keep_intermediates": False, "pitfalls.checkpoint.segments": 0, "pitfalls.transfer": "outside"}
VALUES = {"data.dtype": ("float32", "int64"), "loop.autocast": ("none", "bfloat16"),
          "loop.loss": ("mean", "mse", "cross_entropy"), "loop.optimizer.kind": ("none", "sgd", "adam", "adamw")}


def check_mirrored(config, where):
    """Raises BadInput naming the first key of the merged variant the eager side does not mirror."""
    def leaves(node, prefix):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from leaves(value, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}", value

    for key, value in leaves(config, ""):
        if key in AT_DEFAULT and value != AT_DEFAULT[key]:
            raise BadInput(f"{where}: {key} is {json.dumps(value)}; the eager check mirrors only "
                           f"{json.dumps(AT_DEFAULT[key])}")
        if key in VALUES and value not in VALUES[key]:
            raise BadInput(f"{where}: {key} is {json.dumps(value)}; the eager check mirrors "
                           + ", ".join(json.dumps(v) for v in VALUES[key]))
        if key not in MIRRORED and key not in AT_DEFAULT:
            raise BadInput(f"{where}: the eager check does not mirror {key}" +
                           ("; it needs a TorchScript model (model.torchscript)" if key.startswith("model.") else ""))
    history = config.get("loop", {}).get("loss_history", {})
    if history.get("keep", "none") != "none" and history.get("from", "train") != "eval":
        raise BadInput(f"{where}: loop.loss_history.from is \"train\"; the eager check mirrors \"eval\" only")
    if config.get("loop", {}).get("loss") == "cross_entropy" and "classes" not in config.get("data", {}):
        raise BadInput(f"{where}: loop.loss \"cross_entropy\" needs data.classes")
    if "torchscript" not in config.get("model", {}):
        raise BadInput(f"{where}: the eager check needs a TorchScript model (model.torchscript)")


def known_differences(config, eager):
    """The differences between eager PyTorch and oomguard that have a known cause, each exact:
    {row: (eager minus oomguard, cause or [causes])}; a row not named here must match to the byte. A row is
    "peak", "allocations", "phase peak" (every phase) or "phase peak NAME" (that phase, first)."""
    optimizer = config["loop"].get("optimizer", {})
    kind = optimizer.get("kind", "sgd")
    if kind not in ("adam", "adamw"):
        return {}
    name = {"adam": "Adam", "adamw": "AdamW"}[kind]
    parameters = len(eager["parameter_bytes"])
    cause = (f"Python's {name} keeps each parameter's step count as a 0-dim float32 tensor "
             f"(state['step']: {parameters} x 4 bytes, one allocation each, live from the first step); "
             "LibTorch's C++ optimizer keeps an int64_t")
    # Every phase peak is reached after the first step (the second iteration's), so each is 4 bytes
    # per parameter higher; the first step allocates them.
    known = {"peak": (4 * parameters, cause), "allocations": (parameters, cause), "phase peak": (4 * parameters, cause)}
    # Python's single-tensor loop computes each parameter's denominator into a local, `denom =
    # (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`, which lives until the next parameter's
    # is assigned: while parameter i's sqrt and quotient are live, so is parameter i-1's denom.
    # LibTorch's C++ loop frees it at the end of each parameter's body. (Adam's weight decay adds a
    # third temporary, grad + wd * param, to both; Python's `grad` is rebound at the top of the loop.)
    sizes = eager["parameter_bytes"]
    temporaries = 3 if kind == "adam" and optimizer.get("weight_decay", 0.0) != 0.0 else 2
    python = max(temporaries * b + (sizes[i - 1] if i > 0 else 0) for i, b in enumerate(sizes))
    extra = python - temporaries * max(sizes)
    if extra > 0:
        kept = (f"Python's {name} keeps the previous parameter's `denom` (a loop local) while the next one's "
                f"is computed: the optimizer's peak is {extra} bytes higher; LibTorch's C++ loop frees it "
                "at the end of each parameter")
        known["phase peak optimizer"] = (4 * parameters + extra, [cause, kept])
        peaks = eager["phase_peaks"]
        others = max([v for k, v in peaks.items() if k != "optimizer"] + [peaks.get("optimizer", 0) - extra])
        at_peak = eager["peak"] - others
        if at_peak > 0:
            known["peak"] = (4 * parameters + at_peak, [cause, kept])
    return known


def load_models():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "pytorch-model", "make_models.py")
    spec = importlib.util.spec_from_file_location("make_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    models = {"cnn.pt": module.resnet_cnn, "gpt.pt": lambda: module.GPT(**module.SMALL_GPT)}
    # Your own: EAGER_CHECK_MODELS="unet.pt=/path/unet.py:UNet,..." (a file name, a Python file, a
    # callable that builds the module the .pt was scripted from).
    for entry in filter(None, os.environ.get("EAGER_CHECK_MODELS", "").split(",")):
        pt, _, source = entry.partition("=")
        path, _, factory = source.rpartition(":")
        if not pt or not path or not factory:
            raise BadInput(f"EAGER_CHECK_MODELS: {entry!r} is not NAME.pt=/path/file.py:Callable")
        if not os.path.isfile(path):
            raise BadInput(f"EAGER_CHECK_MODELS: {path}: no such file")
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        user = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(user)
        if not hasattr(user, factory):
            raise BadInput(f"EAGER_CHECK_MODELS: {path} has no {factory}")
        models[pt] = getattr(user, factory)
    return models


def merged_variant(scenario, variant):
    def merge(base, patch):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif isinstance(v, dict) and isinstance(out.get(k), dict):
                out[k] = merge(out[k], v)
            else:
                out[k] = v
        return out

    base = {k: scenario[k] for k in ("model", "data", "loop", "pitfalls", "seed") if k in scenario}
    return merge(base, scenario["variants"][variant])


def draw(data, generator_seed):
    shape = [data["batch"]] + data["shape"]
    if data.get("dtype") == "int64":
        return torch.randint(0, data["vocab"], shape)
    return torch.randn(shape)


def make_optimizer(spec, params):
    kind = spec.get("kind", "sgd")
    if kind == "none":
        return None
    if kind == "sgd":
        return torch.optim.SGD(params, lr=spec.get("lr", 1e-3), momentum=spec.get("momentum", 0.0),
                               weight_decay=spec.get("weight_decay", 0.0), foreach=False)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=spec.get("lr", 1e-3), weight_decay=spec.get("weight_decay", 0.0),
                                 foreach=False)
    if kind == "adam":
        return torch.optim.Adam(params, lr=spec.get("lr", 1e-3), weight_decay=spec.get("weight_decay", 0.0),
                                foreach=False)
    raise BadInput(f"optimizer {kind} is not mirrored")


def eager_measure(config, make_model):
    """Peak, phase peaks (in first-entry order) and allocation count of the eager run."""
    torch.manual_seed(config.get("seed", 0))
    model = make_model()
    data, loop = config["data"], config["loop"]
    evaluation = loop.get("eval", {})
    history = loop.get("loss_history", {})
    iterations = loop.get("iterations", 2)
    params = list(model.parameters())
    optimizer = make_optimizer(loop.get("optimizer", {}), params)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in list(model.parameters()) + list(model.buffers())}
    live_at_start = sum(storages.values())
    train_batches = [draw(data, i) for i in range(iterations)]
    eval_batches = [[draw(data, i) for _ in range(evaluation.get("batches", 0))] for i in range(iterations)]

    # Note [The class axis] (workload/loop/cross_entropy.h): PyTorch's [N, C, d1, ...] with targets [N, d1, ...];
    # token ids' logits [N, T, V] flattened to [N*T, V] as a language model's code does (so is [N, C]).
    token_ids = data.get("dtype") == "int64"

    def loss_of(out):  # as VariantRun::Loss (workload/loop/variant_run.cpp)
        loss = loop.get("loss", "mean")
        if loss == "cross_entropy":
            classes = data["classes"]
            if token_ids or out.dim() == 2:
                target = torch.randint(0, classes, out.shape[:-1])
                return F.cross_entropy(out.reshape(-1, out.size(-1)), target.reshape(-1))
            target = torch.randint(0, classes, out.shape[:1] + out.shape[2:])
            return F.cross_entropy(out, target)
        if loss == "mse":
            return F.mse_loss(out, torch.zeros_like(out))
        return out.mean()

    # loop.autocast: torch.autocast on cpu around each forward and its loss, as oomguard's loop does.
    autocast = loop.get("autocast", "none")

    def mixed_precision():
        if autocast == "none":
            return contextlib.nullcontext()
        return torch.autocast("cpu", dtype=torch.bfloat16)

    kept = []
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for i in range(iterations):
            with record_function("phase:zero_grad"):
                model.zero_grad(set_to_none=True)
            with record_function("phase:transfer"):
                x = torch.empty_like(train_batches[i]).copy_(train_batches[i])
            with record_function("phase:forward"):
                model.train()
                with mixed_precision():
                    out = model(x)
                    loss = loss_of(out)
            with record_function("phase:backward"):
                loss.backward()
                del x, out, loss
            if optimizer is not None:
                with record_function("phase:optimizer"):
                    optimizer.step()
            if evaluation.get("batches", 0) > 0:
                with record_function("phase:eval"):
                    model.eval()
                    outputs = []
                    for host in eval_batches[i]:
                        with torch.set_grad_enabled(not evaluation.get("no_grad", True)), mixed_precision():
                            x = torch.empty_like(host).copy_(host)
                            out = model(x)
                            if history.get("from") == "eval" and history.get("keep", "none") != "none":
                                loss = loss_of(out)
                                keep = history["keep"]
                                if keep == "attached":
                                    kept.append(loss)
                                elif keep == "detached":
                                    kept.append(loss.detach())
                                else:
                                    loss.item()
                                del loss
                            if evaluation.get("keep_outputs"):
                                outputs.append(out)
                            del x, out
                    del outputs
    phases, allocations = [], []  # (begin, end, name); (time, bytes, ptr, excluded)

    # Note [Host scalars] (backends/host_scalars.h): a number passed where an op takes a tensor is
    # wrapped in a 0-dim cpu tensor (by Python's argument parser outside any op, or by a Scalar
    # overload of add/sub/mul/div before it redispatches), and TensorIterator casts it with a small
    # _to_copy; a GPU keeps these on the host, and oomguard books none of them on the device.
    wrapping_ops = {f"aten::{op}{inplace}" for op in ("add", "sub", "mul", "div") for inplace in ("", "_")}

    def walk(node, to_copy_depth):
        kind, fields = node.typed
        if kind == _EventType.Allocation:
            parent = node.parent
            parent_name = parent.name if parent is not None else ""
            before_nested_op = parent is not None and parent_name in wrapping_ops and any(
                c.typed[0] == _EventType.TorchOp and c.start_time_ns > node.start_time_ns for c in parent.children)
            host_scalar = fields.alloc_size > 0 and (not parent_name.startswith("aten::") or before_nested_op or
                                                     (to_copy_depth > 0 and fields.alloc_size <= 8))
            allocations.append((node.start_time_ns, fields.alloc_size, fields.ptr, host_scalar))
            return
        if node.name.startswith("phase:"):
            phases.append((node.start_time_ns, node.end_time_ns, node.name[6:]))
        inside = to_copy_depth + (1 if node.name == "aten::_to_copy" else 0)
        for child in node.children:
            walk(child, inside)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root, 0)
    phases.sort()
    # A phase's entry is an event too: the ledger's phase peak starts at the live bytes it finds.
    timeline = sorted([(t, 1, n, ptr, host) for t, n, ptr, host in allocations] +
                      [(begin, 0, 0, None, False) for begin, _, _ in phases])
    live, peak, allocs, host_scalars = live_at_start, live_at_start, 0, 0
    phase_peaks, phase_allocs, host_pointers = {}, {}, set()
    events_by_entry = [["setup", 0]]
    dump = []
    for at, _, nbytes, ptr, host in timeline:
        if host:
            host_pointers.add(ptr)
            host_scalars += 1
            continue
        if nbytes < 0 and ptr in host_pointers:
            host_pointers.discard(ptr)
            continue
        live += nbytes
        if os.environ.get("EAGER_CHECK_DUMP"):
            dump.append(f"{'alloc' if nbytes > 0 else 'free_completed'} {abs(nbytes)}")
        phase = next((name for begin, end, name in reversed(phases) if begin <= at <= end), "outside")
        if _ == 1:
            events_by_entry[-1][1] += 1
        else:
            events_by_entry.append([phase, 0])
        if nbytes > 0:
            allocs += 1
            phase_allocs.setdefault(phase, []).append(nbytes)
        phase_peaks[phase] = max(phase_peaks.get(phase, 0), live)
        peak = max(peak, live)
    if os.environ.get("EAGER_CHECK_DUMP"):
        with open(os.environ["EAGER_CHECK_DUMP"], "w") as f:
            f.write("\n".join(dump))
    if os.environ.get("EAGER_CHECK_VERBOSE"):
        for phase, sizes in phase_allocs.items():
            print(f"    eager {phase}: {len(sizes)} allocations, first sizes {sizes[:40]}")
        print(f"    eager host scalars left out: {host_scalars}")
        print(f"    eager events (allocations and frees) per phase entry: {events_by_entry}")
    return {"peak": peak, "phase_peaks": phase_peaks, "allocs": allocs, "setup_allocs": len(storages),
            "parameter_bytes": parameter_bytes(params),
            "allocation_sizes": {phase: sorted(sizes) for phase, sizes in phase_allocs.items()}}


def parameter_bytes(params):
    """Each parameter's bytes, once each, in the optimizer's order."""
    seen, out = set(), []
    for p in params:
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            out.append(p.numel() * p.element_size())
    return out


def lifetime_differences(eager, scripted_measure):
    """Note [Python keeps a forward's locals]: Python frees a forward's local variables when it
    returns, the TorchScript interpreter (which oomguard runs) frees each value after its last use.
    Under no_grad a local that holds a skip connection's input lives on in Python only; with autograd
    on, so does a local that autograd never saved (a ViT's layer-norm output: +1.1%). The difference is
    measured, not assumed: the same loop is run again from the .pt file in Python (graph optimisation
    off, as oomguard runs it) and, when that run makes exactly the same allocations per phase, the
    eager run's excess over it in the forward and eval phase peaks and in the peak is this cause.
    Returns {row: (bytes, cause)}."""
    try:
        scripted = scripted_measure()
    except Exception as e:  # a .pt saved from the meta device, say: the cause stays unmeasured
        print(f"  (the module could not run from its .pt file in Python: {e})")
        return {}
    if scripted["allocation_sizes"] != eager["allocation_sizes"]:
        print("  (the module run from its .pt file in Python allocates differently from the Python class: "
              "the check cannot tell a lifetime difference from another one)")
        return {}
    extras = {}
    for row, phase in (("phase peak forward", "forward"), ("phase peak eval", "eval"), ("peak", None)):
        extra = (eager["phase_peaks"].get(phase, 0) - scripted["phase_peaks"].get(phase, 0) if phase
                 else eager["peak"] - scripted["peak"])
        if extra > 0:
            extras[row] = extra
    cause = ("Python keeps a forward's local variables until it returns, the TorchScript interpreter frees each "
             "after its last use: run from its .pt file in Python, the module makes the same allocations and peaks "
             "lower (" + ", ".join(f"{row}: {extra} bytes" for row, extra in extras.items()) + ")")
    return {row: (extra, cause) for row, extra in extras.items()}


def oomguard_measure(exe, scenario_file, scenario_name, variant, out_dir):
    results = os.path.join(out_dir, f"{scenario_name}.{variant}.results.json")
    run = subprocess.run([exe, "run", scenario_file, "--backend", "cpu", "--filter", f"{scenario_name}/{variant}",
                          "--json", results], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if not os.path.exists(results):
        raise BadInput(f"{scenario_file}: `oomguard run` wrote no results (exit {run.returncode}):\n{run.stderr}")
    with open(results) as f:
        measured = json.load(f)
    for scenario in measured["scenarios"]:
        for v in scenario["variants"]:
            if v["name"] == variant and "measurement" in v:
                return v["measurement"]
    raise BadInput(f"{scenario_file}: oomguard measured no variant {variant} (exit {run.returncode}):\n{run.stderr}")


def load_scenario(folder, name, variant):
    path = os.path.join(folder, name)
    try:
        with open(path) as f:
            scenario = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: cannot read it ({e.strerror})")
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not JSON ({e})")
    if variant not in scenario.get("variants", {}):
        raise BadInput(f"{path}: no variant {variant!r}; it has {', '.join(scenario.get('variants', {})) or 'none'}")
    config = merged_variant(scenario, variant)
    check_mirrored(config, f"{path}, variant {variant}")
    return path, scenario, config


def compare(exe, folder, models, name, variant, out_dir):
    """Prints one scenario variant's rows; returns how many are DIFFERENT."""
    path, scenario, config = load_scenario(folder, name, variant)
    pt = config["model"]["torchscript"]
    if pt not in models:
        raise BadInput(f"{path}: model.torchscript {pt!r} has no Python class; set "
                       f"EAGER_CHECK_MODELS=\"{pt}=/path/to/file.py:ClassName\"")
    pt_path = os.path.join(folder, pt)
    eager = eager_measure(config, models[pt])
    m = oomguard_measure(exe, path, scenario["name"], variant, out_dir)
    ours = {p["phase"]: p["peak_bytes"] for p in m["phase_peaks"] if p["phase"] != "setup"}
    if os.environ.get("EAGER_CHECK_VERBOSE"):
        marks = m["timeline"]["phases"]
        print("    oomguard events per phase entry:",
              [[p, (marks[i + 1][0] if i + 1 < len(marks) else None) - e if i + 1 < len(marks) else None]
               for i, (e, p) in enumerate(marks)])
    # oomguard's setup phase makes each parameter and buffer (one allocation each); eager made
    # them before the profiler started.
    rows = [("peak", "peak", eager["peak"], m["peak_bytes"]),
            ("allocations", "allocations after setup", eager["allocs"], m["alloc_count"] - eager["setup_allocs"])]
    rows += [("phase peak", f"phase peak {p}", eager["phase_peaks"].get(p), ours.get(p))
             for p in sorted(set(ours) | set(eager["phase_peaks"]))]
    print(f"{scenario['name']} / {variant}: eager PyTorch (profiler memory events) vs oomguard run --backend cpu")
    known = {what: (expected, cause if isinstance(cause, list) else [cause])
             for what, (expected, cause) in known_differences(config, eager).items()}

    def expected_of(row, what):
        return known.get(what, known.get(row, (0, [])))

    lifetime_rows = ("peak", "phase peak forward", "phase peak eval")
    if any(what in lifetime_rows and e is not None and o is not None and e - o > expected_of(row, what)[0]
           for row, what, e, o in rows):
        scripted = lambda: eager_measure(config, lambda: torch.jit.load(pt_path))  # noqa: E731
        for what, (extra, cause) in lifetime_differences(eager, scripted).items():
            expected, causes = expected_of("phase peak" if what != "peak" else "peak", what)
            known[what] = (expected + extra, causes + [cause])
    failures, causes = 0, set()
    for row, what, e, o in rows:
        expected, cause = expected_of(row, what)
        if e is None or o is None or e - o != expected:
            failures += 1
            verdict = "DIFFERENT" + (f" (expected eager - oomguard = {expected})" if expected else "")
        elif expected:
            verdict = f"eager +{expected}: known, see below"
            causes.update(cause)
        else:
            verdict = "same"
        print(f"  {what:<28} eager {e!s:>12}  oomguard {o!s:>12}  {verdict}")
    for cause in sorted(causes):
        print(f"  known difference: {cause}")
    return failures


def main():
    parser = argparse.ArgumentParser(
        description="Compare `oomguard run --backend cpu` with the same training in eager PyTorch (profiler "
                    "memory events) for TorchScript scenarios. Exit 0: the same, or known differences only; "
                    "1: a difference without a known cause; 2: bad input.",
        epilog="Your own model: EAGER_CHECK_MODELS=\"net.pt=/path/net.py:Net\" (the Python class the .pt was "
               "scripted from). EAGER_CHECK_VERBOSE=1 prints the allocations per phase.")
    parser.add_argument("oomguard", metavar="OOMGUARD", help="the oomguard executable (or your program built on oomguard/main.h)")
    parser.add_argument("folder", metavar="FOLDER", help="the folder with the scenario files and the .pt files they name")
    parser.add_argument("pairs", nargs="+", metavar="SCENARIO VARIANT", help="a scenario file in FOLDER and one of "
                        "its variants; several pairs may follow")
    parser.add_argument("--out", metavar="DIR", help="keep oomguard's results files here (default: a temporary folder, removed)")
    args = parser.parse_args()
    if len(args.pairs) % 2:
        parser.error(f"SCENARIO VARIANT pairs expected; {args.pairs[-1]!r} has no variant")
    torch.set_num_threads(1)  # as oomguard's children run: per-thread scratch buffers match
    warnings.simplefilter("ignore")
    try:
        for path, what in ((args.oomguard, "the oomguard executable"), (args.folder, "FOLDER")):
            if not os.path.exists(path):
                raise BadInput(f"{path}: no such file or folder ({what})")
        models = load_models()
        failures = 0
        with contextlib.ExitStack() as stack:
            out_dir = args.out or stack.enter_context(tempfile.TemporaryDirectory(prefix="eager-check-"))
            os.makedirs(out_dir, exist_ok=True)
            # As oomguard runs a module: the graph executor's optimisation off (README, "Eager autograd").
            stack.enter_context(torch.jit.optimized_execution(False))
            for name, variant in zip(args.pairs[::2], args.pairs[1::2]):
                failures += compare(args.oomguard, args.folder, models, name, variant, out_dir)
    except BadInput as e:
        print(f"pytorch_eager_check: {e}", file=sys.stderr)
        sys.exit(2)
    if failures:
        print(f"{failures} difference(s) without a known cause")
        sys.exit(1)


if __name__ == "__main__":
    main()
