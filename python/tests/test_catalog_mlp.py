"""Python.MlpLoopEqualsTheCatalogVariant: the Python loop of examples/python/mlp_eval.py measures the
bytes the C++ catalog measures for scenarios/forgotten-no-grad.json, variant by variant, on cpu and on meta.

Usage: test_catalog_mlp.py OOMGUARD_CLI SCENARIO_FILE. The CLI runs both variants on cpu and writes its
numbers as JSON; the same loop (model, Adam, batches, phases, 2 iterations, 8 kept eval outputs) then
runs in this process under oomguard.measure on one thread. Where PyTorch's Python Adam and LibTorch's
C++ Adam keep different tensors, the difference is derived here from the Python optimizer itself.
"""
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])

import torch
from checks import Checks

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
import mlp_eval  # noqa: E402

torch.set_num_threads(1)


def catalog(cli, scenario):
    """{variant: measurement} from `oomguard run SCENARIO --backend cpu --json`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        subprocess.run([cli, "run", scenario, "--backend", "cpu", "--json", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            variants = json.load(f)["scenarios"][0]["variants"]
    return {v["measurement"]["variant"]: v["measurement"] for v in variants}


def python_adam_extra(opt):
    """What torch.optim.Adam keeps on the measured device that torch::optim::Adam does not, in bytes, at
    the step's peak. (Its 0-dim float32 `step` tensor per parameter, where LibTorch keeps an int64_t, is on
    cpu whatever the parameters' device: host memory, outside the numbers on every backend, Note [The
    Python optimizer's step counts].) At the step's peak (the largest parameter's sqrt and division temporaries, as in C++), the previous
      parameter's `denom`, still held by the Python loop's local variable. (The float64 0-dim tensor
      Python's argument parser wraps the float divisor in is host memory on every backend, as LibTorch's
      own wrapped numbers are: Notes [Python's wrapped numbers] and [Host scalars].)"""
    params = [p for group in opt.param_groups for p in group["params"]]
    largest = max(range(len(params)), key=lambda i: params[i].nbytes)
    return params[largest - 1].nbytes if largest > 0 else 0


def measured(no_grad, backend):
    import oomguard

    with oomguard.measure(card="t4", backend=backend) as m:
        opt = mlp_eval.train(m, no_grad=no_grad)
    at_step_peak = python_adam_extra(opt)
    del opt  # a later measurement would count its tensors' frees
    return m.result, at_step_peak


def compare(check, name, cpp, r, at_step_peak):
    cpp_phases = {p["phase"]: p["peak_bytes"] for p in cpp["phase_peaks"]}
    offset = {phase: 0 for phase in cpp_phases}
    offset["optimizer"] += at_step_peak
    check(f"{name}: phase peaks = the catalog's + Python Adam's",
          {p: r.phase_peak_bytes.get(p) for p in cpp_phases}, {p: b + offset[p] for p, b in cpp_phases.items()})
    check(f"{name}: peak", r.peak_bytes, cpp["peak_bytes"] + offset[cpp["peak_phase"]])
    check(f"{name}: peak phase", r.peak_phase, cpp["peak_phase"])
    check(f"{name}: live after each iteration", list(r.live_after_iteration),
          [i["live_after_bytes"] for i in cpp["iterations"]])
    check(f"{name}: parameters", r.breakdown["parameters"], cpp["param_bytes"])
    check(f"{name}: gradients", r.breakdown["gradients"], cpp["grad_bytes"])
    check(f"{name}: optimizer state", r.breakdown["optimizer_state"], cpp["optimizer_state_bytes"])
    check(f"{name}: forward saved", r.breakdown["forward_saved"], cpp["forward_saved_bytes"])
    check(f"{name}: diagnoses", [(d.kind, d.bytes) for d in r.diagnoses],
          [(d["kind"], d["bytes"]) for d in cpp["diagnoses"]])


def main():
    cli, scenario = sys.argv[1:3]
    check = Checks()
    cpp = catalog(cli, scenario)
    # On meta the Python loop runs the C++ tool's Meta kernels (Note [Which Meta kernel runs in Python]),
    # which mirror cpu's allocations: it books the catalog's cpu bytes too, but for what Adam keeps on the host.
    for backend in ("cpu", "meta"):
        for variant, no_grad in (("pitfall", False), ("fixed", True)):
            r, at_step_peak = measured(no_grad, backend)
            name = f"{variant} on {backend}"
            print(f"{name}: python {r.describe()}\n  Adam's extra at the step's peak: {at_step_peak}")
            compare(check, name, cpp[variant], r, at_step_peak)
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
