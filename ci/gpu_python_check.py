"""The Python package on a GPU (Note [The cuda backend in Python], python/oomguard/measure.py): the
catalog's forgotten-no-grad loop in Python (examples/python/mlp_eval.py), both variants, measured by
oomguard.measure on backend="cuda" (PyTorch's own caching allocator, capped at a T4), against the same
loop on cpu (exact bytes, cpu's kernels, the allocator model) and on meta with the GPU's CUDA kernels;
then one rank of FSDP2 and of DDP at world 2 and 4 on the three (ci/gpu_python_ranks.py). Writes a
Markdown table to OUT_DIR/python-cuda.md and prints it; exit 1 if a cuda measurement cannot run, 0
otherwise (the table is a report: read it).

    python3 ci/gpu_python_check.py OUT_DIR   # PYTHONPATH holds the bundle's python/ (ci/gpu_check.sh)
"""
import os
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "examples", "python"))

import glob  # noqa: E402
import sysconfig  # noqa: E402

import torch  # noqa: E402

try:
    import oomguard  # noqa: E402
except ImportError as e:  # Note [A _core per Python]: the bundle's _core is built for one Python version
    cores = sorted({os.path.basename(c) for p in sys.path for c in glob.glob(os.path.join(p, "oomguard", "_core*.so"))})
    sys.exit(f"gpu_python_check: cannot import oomguard ({e}): this Python {sys.version.split()[0]} needs "
             f"_core{sysconfig.get_config_var('EXT_SUFFIX')}, the bundle has {', '.join(cores) or 'none'} "
             "(ci/gpu_bundle.sh builds it for this machine's Python)")
import mlp_eval  # noqa: E402
import gpu_python_ranks  # noqa: E402

GPU_CARD = os.environ.get("OOMGUARD_GPU_CARD", "h200")  # the preset whose compute capability the GPU has


def measured(no_grad, **options):
    with oomguard.measure(**options) as m:
        opt = mlp_eval.train(m, no_grad=no_grad)
    del opt
    return m.result


def row(name, r):
    alloc, reserved = ((r.cuda.allocated_peak_bytes, r.cuda.reserved_peak_bytes) if r.cuda is not None else
                       (r.cuda_model.allocated_peak_bytes, r.cuda_model.reserved_peak_bytes) if r.cuda_model else (None, None))
    phases = ", ".join(f"{p} {b}" for p, b in sorted(r.phase_peak_bytes.items()))
    return f"| {name} | {r.outcome} | {r.peak_bytes} | {alloc} | {reserved} | {phases} |"


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lines = ["| run | outcome | ledger peak | allocated peak | reserved peak | phase peaks |", "|---|---|---|---|---|---|"]
    status = 0
    for variant, no_grad in (("pitfall", False), ("fixed", True)):
        runs = [("cpu, card t4", dict(card="t4", backend="cpu")),
                (f"meta, kernels cuda ({GPU_CARD})", dict(card=GPU_CARD, backend="meta", kernels="cuda")),
                ("cuda, card t4", dict(card="t4", backend="cuda"))]
        for name, options in runs:
            try:
                lines.append(row(f"{variant}: {name}", measured(no_grad, **options)))
            except Exception as e:  # noqa: BLE001 - a report: say what failed and go on
                lines.append(f"| {variant}: {name} | error: {type(e).__name__}: {str(e)[:200]} | | | | |")
                status = 1 if options["backend"] == "cuda" else status
    # The ranks of the fake group (issue #34), each in a process of its own: gpu_python_ranks.py.
    rank_lines, cuda_ran = gpu_python_ranks.table()
    lines += ["", "One rank of FSDP2 and DDP in the fake process group (ci/gpu_python_ranks.py):", ""] + rank_lines
    status = status if cuda_ran else 1
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "python-cuda.md"), "w") as f:
        f.write(text)
    print(text)
    print("python-cuda: the cuda measurements ran" if status == 0 else
          "python-cuda: some cuda measurements did not run: see the errors above")
    return status


if __name__ == "__main__":
    sys.exit(main())
