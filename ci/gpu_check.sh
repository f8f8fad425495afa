#!/usr/bin/env bash
# The GPU check (issue: the cuda backend): on a machine with a GPU and torch 2.11, run the GPU tests,
# the catalog on cuda, cpu and meta, and write the fidelity table (each variant's cpu and meta peaks
# against the cuda run's). Uses binaries from ci/gpu_bundle.sh; needs no compiler and no network.
#   ci/gpu_check.sh BUNDLE_DIR OUT_DIR
# OUT_DIR receives: version.txt, gpu-tests.txt, {cuda,cpu,meta,meta-card}.json, fidelity.txt, fidelity.md,
# fit-{cuda,meta,meta-card}.json and fit-boundary.md (the largest batch that fits two cards, cuda
# against meta with cpu's kernels and with the cards' CUDA kernels, `--kernels cuda`), python-cuda.md
# (the Python package's backend="cuda" against cpu and card mode: ci/gpu_python_check.py), ranks-cuda.txt
# and .json (a world-2 scenario on cuda: UNSUPPORTED with its reason below 2 GPUs, NCCL's 2 ranks from 2).
# The GPU tests include a one-rank ProcessGroupNCCL on cuda:0 (CudaNcclGroupOnGpu.*).
# Exit code: that of the GPU tests, else 0 (the fidelity table is a report, read it).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$(cd "${1:?bundle dir}" && pwd)"
out="${2:?output dir}"
mkdir -p "$out"
# LibTorch from the machine's own torch; without one, the binaries fall back to their build-time path.
# The binaries also need libcudart.so.13 directly: the wheel keeps it in site-packages/nvidia/*/lib, which
# LibTorch's own RUNPATH finds for itself but an executable's search does not.
torch_lib="${OOMGUARD_TORCH_LIB:-$(python3 -c 'import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join([os.path.join(os.path.dirname(torch.__file__), "lib")] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))))' 2>/dev/null || true)}"
if [ -n "$torch_lib" ]; then
  export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  echo "gpu_check: no python3 with torch found; using the LibTorch the binaries were built against" >&2
fi
export OOMGUARD_CATALOG="$root/scenarios" NO_COLOR=1
og="$bundle/oomguard"
jobs="$(nproc)"; [ "$jobs" -gt 8 ] && jobs=8

"$og" --version | tee "$out/version.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$out/version.txt" 2>&1 || true
"$bundle/oomguard_tests" --gtest_filter='Cuda*' 2>&1 | tee "$out/gpu-tests.txt"
tests_rc=${PIPESTATUS[0]}

# Real ranks on cuda (Note [Ranks need a GPU each], run/rank_children.h): a world of 2 runs two NCCL
# ranks on a machine with 2 GPUs; with fewer it is UNSUPPORTED, saying how many it needs and has.
mkdir -p "$out/ranks"
cat > "$out/ranks/nccl-ranks.json" <<'JSON'
{"name": "nccl-ranks", "summary": "two ranks of ddp on NCCL, a GPU each", "backends": ["cpu", "meta", "cuda"],
 "model": {"layers": [{"kind": "linear", "in": 64, "out": 64}, {"kind": "relu"}, {"kind": "linear", "in": 64, "out": 8}]},
 "data": {"batch": 16, "shape": [64]}, "loop": {"iterations": 2, "loss": "mse", "optimizer": {"kind": "adam"}},
 "parallel": {"world": 2, "strategy": "ddp"}, "variants": {"ddp": {}}}
JSON
"$og" run "$out/ranks/nccl-ranks.json" --backend cuda --json "$out/ranks-cuda.json" > "$out/ranks-cuda.txt" 2>&1
tail -4 "$out/ranks-cuda.txt"

# cuda variants run one at a time: they share the GPU and its allocator statistics are per process
# anyway, but concurrent ones would compete for the device's memory under their caps.
"$og" run --backend cuda --jobs 1 --json "$out/cuda.json" > "$out/cuda.txt" 2>&1
# cpu also runs the caching allocator's model: its predicted peaks stand beside the real ones.
"$og" run --backend cpu --model-cuda --jobs "$jobs" --json "$out/cpu.json" > "$out/cpu.txt" 2>&1
"$og" run --backend meta --jobs "$jobs" --json "$out/meta.json" > "$out/meta.txt" 2>&1
# meta as this GPU (Note [Meta as a card]): its CUDA kernels at its compute capability. The cuda run
# is capped as the default card, a T4, but runs the GPU's own kernels; OOMGUARD_GPU_CARD names the
# preset whose capability the GPU has (an H200 or H100: sm_90). Its peaks are at the T4's cap too: no
# catalog variant comes near it.
gpu_card="${OOMGUARD_GPU_CARD:-h200}"
"$og" run --backend meta --kernels cuda --card "$gpu_card" --jobs "$jobs" --json "$out/meta-card.json" \
  > "$out/meta-card.txt" 2>&1
tail -3 "$out/cuda.txt" "$out/cpu.txt" "$out/meta.txt" "$out/meta-card.txt"
"$og" compare "$out/cpu.json" "$out/meta.json" "$out/meta-card.json" "$out/cuda.json" --md "$out/fidelity.md" \
  | tee "$out/fidelity.txt"

# The OOM boundary: where meta predicts a batch stops fitting, against where it stops on the GPU.
fit_scenario="${OOMGUARD_FIT_SCENARIO:-forgotten-no-grad}" fit_cards="${OOMGUARD_FIT_CARDS:-t4,a10}"
for backend in cuda meta; do
  "$og" fit "$fit_scenario" --cards "$fit_cards" --max 4194304 --backend "$backend" --json "$out/fit-$backend.json" \
    > "$out/fit-$backend.txt" 2>&1
done
# Card mode at each card's own capability (a T4's sm_75 kernels, not this GPU's): where the two
# disagree, read the cuBLAS workspaces first (8.1 MiB below sm_90, 32 MiB from it, + 1 MiB cuBLASLt: held
# from the start in both, card mode in its model's reserved bytes).
"$og" fit "$fit_scenario" --cards "$fit_cards" --max 4194304 --backend meta --kernels cuda \
  --json "$out/fit-meta-card.json" > "$out/fit-meta-card.txt" 2>&1
python3 - "$out/fit-meta.json" "$out/fit-meta-card.json" "$out/fit-cuda.json" > "$out/fit-boundary.md" <<'PY'
import json, os, sys
paths = dict(zip(("meta", "meta --kernels cuda", "cuda"), sys.argv[1:4]))
missing = [path for path in paths.values() if not os.path.exists(path)]
if missing:
    sys.exit(f"no fit results in {', '.join(missing)}: see the .txt beside it")
fits = {name: json.load(open(path))["fit"] for name, path in paths.items()}
def cells(fit):
    return {(v["variant"], c["card"] or str(c["cap_bytes"])): c["max_value"] for v in fit["variants"] for c in v["cards"]}
meta, card, cuda = (cells(fits[name]) for name in paths)
first = fits["meta"]
def diff(a, b):
    return "-" if a is None or b is None else f"{b - a:+d} ({100.0 * (b - a) / a:+.1f}%)"
print(f"{first['scenario']}: the largest {first['knob_field']} that fits; cuda against meta with cpu's kernels and "
      "with the card's CUDA kernels\n")
print("| variant | card | meta | meta --kernels cuda | cuda | cuda - meta | cuda - card mode |\n|---|---|---|---|---|---|---|")
for key in meta:
    a, k, b = meta[key], card.get(key), cuda.get(key)
    print(f"| {key[0]} | {key[1]} | {a} | {k} | {b} | {diff(a, b)} | {diff(k, b)} |")
PY
cat "$out/fit-boundary.md"

# The Python package on the GPU: oomguard.measure(backend="cuda") against cpu and card mode. Its _core
# is built for this machine's Python version (cp311): another Python says so and skips.
PYTHONPATH="$bundle/python${PYTHONPATH:+:$PYTHONPATH}" python3 "$root/ci/gpu_python_check.py" "$out" \
  > "$out/python-cuda.txt" 2>&1 || echo "gpu_check: the Python check failed: see python-cuda.txt" >&2
tail -12 "$out/python-cuda.txt"
exit "$tests_rc"
