#!/usr/bin/env bash
# The GPU check (issues: the cuda backend, #33/#34): on a machine with a GPU and torch 2.11, run the GPU
# tests, the catalog on cuda, cpu and meta, and write the fidelity table (each variant's cpu and meta peaks
# against the cuda run's). Uses binaries from ci/gpu_bundle.sh; needs no compiler and no network.
#   ci/gpu_check.sh BUNDLE_DIR OUT_DIR
# OUT_DIR receives: summary.md (one page: the steps with their times and exit codes, then the tables below,
# to paste into README's "On a GPU"), version.txt, gpu-tests.txt, {cuda,cpu,meta,meta-card}.{json,txt},
# fidelity.txt, fidelity.md, fit-{cuda,meta,meta-card}.{json,txt} and fit-boundary.md (the largest batch
# that fits two cards, cuda against meta with cpu's kernels and with the cards' CUDA kernels), python-cuda.md
# (the Python package's backend="cuda" against cpu and card mode, one process and the fake group's ranks:
# ci/gpu_python_check.py), corpus.md (real models on cuda against card mode: ci/gpu_corpus_check.py), ranks-cuda.txt and .json (a world-2 scenario on cuda: UNSUPPORTED with its
# reason below 2 GPUs, NCCL's 2 ranks from 2), steps.tsv (step, exit code, seconds, timeout).
# The GPU tests include a one-rank ProcessGroupNCCL on cuda:0 (CudaNcclGroupOnGpu.*).
# Exit code: 1 if there is a GPU and the GPU tests failed or skipped, else 0 (the tables are a report: read
# summary.md). Without a GPU every cuda step says so at once and the others still run (the rehearsal).
# On a lent device (its run returns at most 8 files): carry gpu-bundle, timeout_s 600, and
#   OOMGUARD_CHECK_PACK=$OUT ci/gpu_check.sh gpu-bundle /tmp/gpu-check
# Knobs: OOMGUARD_PYTHON (the Python that has torch; default python3), OOMGUARD_GPU_CARD (h200),
# OOMGUARD_FIT_SCENARIO, OOMGUARD_FIT_CARDS, OOMGUARD_FIT_MAX, OOMGUARD_CUDA_SHARDS, OOMGUARD_CHECK_BUDGET_S,
# OOMGUARD_CHECK_PACK, OOMGUARD_STEP_TIMEOUT_SCALE (a factor on every step's timeout, for a slow machine).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$(cd "${1:?usage: ci/gpu_check.sh BUNDLE_DIR OUT_DIR}" && pwd)" || exit 2
out="${2:?usage: ci/gpu_check.sh BUNDLE_DIR OUT_DIR}"
[ -x "$bundle/oomguard" ] || { echo "gpu_check: $bundle/oomguard is missing: run ci/gpu_bundle.sh first" >&2; exit 2; }
mkdir -p "$out" && out="$(cd "$out" && pwd)"
py="${OOMGUARD_PYTHON:-python3}"
started=$SECONDS
# LibTorch from the machine's own torch; without one, the binaries fall back to their build-time path.
# The binaries also need libcudart.so.13 directly: the wheel keeps it in site-packages/nvidia/*/lib, which
# LibTorch's own RUNPATH finds for itself but an executable's search does not.
torch_lib="${OOMGUARD_TORCH_LIB:-$(timeout 60 "$py" -c 'import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join([os.path.join(os.path.dirname(torch.__file__), "lib")] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))))' 2>/dev/null || true)}"
if [ -n "$torch_lib" ]; then
  export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  echo "gpu_check: $py has no torch; using the LibTorch the binaries were built against" >&2
fi
export OOMGUARD_CATALOG="$root/scenarios" NO_COLOR=1 PYTHONUNBUFFERED=1
og="$bundle/oomguard"
cores="$(nproc)"
scale="${OOMGUARD_STEP_TIMEOUT_SCALE:-1}"
: > "$out/steps.tsv"

# Note [Every step has a timeout]: the device lends 15 minutes for all tries together, so a step that
# hangs (a CUDA call waiting on a driver, a collective waiting on a peer) must not take the rest with it.
# step NAME SECONDS CMD... runs CMD under `timeout` (SIGTERM, then SIGKILL 10 s later), its output in
# OUT/NAME.txt, and appends "NAME exit-code seconds timeout" to steps.tsv (exit 124: it timed out). No step
# runs past the check's budget (OOMGUARD_CHECK_BUDGET_S, 480 s: a device command's limit is 600 s), so
# the tables and summary.md are written even when steps hang; they take a few seconds.
budget_end=$(( started + ${OOMGUARD_CHECK_BUDGET_S:-480} ))
step() {
  local name="$1" limit="$2"; shift 2
  limit=$(( limit * scale )); local t0=$SECONDS rc
  [ "$limit" -gt $(( budget_end - SECONDS )) ] && limit=$(( budget_end - SECONDS ))
  [ "$limit" -lt 5 ] && limit=5
  timeout -k 10 "$limit" "$@" > "$out/$name.txt" 2>&1; rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( SECONDS - t0 ))" "$limit" >> "$out/steps.tsv"
  [ "$rc" = 124 ] && echo "gpu_check: $name timed out after $limit s" >> "$out/$name.txt"
  echo "gpu_check: $name: exit $rc in $(( SECONDS - t0 )) s" >&2
  return 0
}

step version 30 "$og" --version
cat "$out/version.txt"
# Whether there is a GPU, asked of the driver: the cuda steps below otherwise report UNSUPPORTED and skip.
gpu="$(timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
gpu_mib="$(timeout 30 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)"
if [ -z "$gpu" ] && [ -n "$torch_lib" ]; then  # no nvidia-smi on the PATH: ask torch
  read -r gpu_mib gpu < <(timeout 60 "$py" -c 'import torch
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0); print(p.total_memory >> 20, f"{p.name} (torch), {p.total_memory >> 20} MiB")' 2>/dev/null)
fi
echo "gpu: ${gpu:-none (nvidia-smi found no GPU: the cuda steps report UNSUPPORTED or skip)}" | tee -a "$out/version.txt"
if [ -n "$torch_lib" ]; then
  timeout 60 "$py" -W ignore -c 'import sys, torch; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")' \
    >> "$out/version.txt" 2>&1
fi

# Note [The check's order]: the cuda steps share one GPU and run one after another (a variant's process
# has the device's memory under its cap to itself); the cpu and meta steps use only the host's cores and
# run beside them, in the background, with the cores split between them. On the device's 16 cores the
# cuda side is the longer one.
cpu_jobs=$(( cores / 3 )); [ "$cpu_jobs" -lt 1 ] && cpu_jobs=1
gpu_card="${OOMGUARD_GPU_CARD:-h200}"
fit_scenario="${OOMGUARD_FIT_SCENARIO:-forgotten-no-grad}" fit_cards="${OOMGUARD_FIT_CARDS:-t4,a10}"
fit_max="${OOMGUARD_FIT_MAX:-4194304}"
(
  # cpu also runs the caching allocator's model: its predicted peaks stand beside the real ones.
  step cpu 300 "$og" run --backend cpu --model-cuda --jobs "$cpu_jobs" --json "$out/cpu.json" &
  step meta 300 "$og" run --backend meta --jobs "$cpu_jobs" --json "$out/meta.json" &
  # meta as this GPU (Note [Meta as a card]): its CUDA kernels at its compute capability. The cuda run
  # is capped as the default card, a T4, but runs the GPU's own kernels; OOMGUARD_GPU_CARD names the
  # preset whose capability the GPU has (an H200 or H100: sm_90). Its peaks are at the T4's cap too: no
  # catalog variant comes near it.
  step meta-card 300 "$og" run --backend meta --kernels cuda --card "$gpu_card" --jobs "$cpu_jobs" \
    --json "$out/meta-card.json" &
  wait
  # The OOM boundary on meta: with cpu's kernels, and in card mode at each card's own capability (a T4's
  # sm_75 kernels, not this GPU's): where it and cuda disagree, read the cuBLAS workspaces first (8.1 MiB
  # below sm_90, 32 MiB from it, + 1 MiB cuBLASLt: held from the start in both).
  step fit-meta 240 "$og" fit "$fit_scenario" --cards "$fit_cards" --max "$fit_max" --backend meta \
    --json "$out/fit-meta.json" &
  step fit-meta-card 240 "$og" fit "$fit_scenario" --cards "$fit_cards" --max "$fit_max" --backend meta \
    --kernels cuda --json "$out/fit-meta-card.json" &
  wait
) &
host_side=$!

step gpu-tests 120 "$bundle/oomguard_tests" --gtest_filter='Cuda*'
tests_rc=$(awk -F'\t' '$1 == "gpu-tests" { print $2 }' "$out/steps.tsv")
# Real ranks on cuda (Note [Ranks need a GPU each], run/rank_children.h): a world of 2 runs two NCCL
# ranks on a machine with 2 GPUs; with fewer it is UNSUPPORTED, saying how many it needs and has.
mkdir -p "$out/ranks"
cat > "$out/ranks/nccl-ranks.json" <<'JSON'
{"name": "nccl-ranks", "summary": "two ranks of ddp on NCCL, a GPU each", "backends": ["cpu", "meta", "cuda"],
 "model": {"layers": [{"kind": "linear", "in": 64, "out": 64}, {"kind": "relu"}, {"kind": "linear", "in": 64, "out": 8}]},
 "data": {"batch": 16, "shape": [64]}, "loop": {"iterations": 2, "loss": "mse", "optimizer": {"kind": "adam"}},
 "parallel": {"world": 2, "strategy": "ddp"}, "variants": {"ddp": {}}}
JSON
step ranks-cuda 60 "$og" run "$out/ranks/nccl-ranks.json" --backend cuda --json "$out/ranks-cuda.json"
# Note [The catalog on cuda in shards]: `run --backend cuda` takes one variant at a time (Note [One cuda
# variant at a time], run/runner.cpp: a neighbour's memory would count against a variant's cap), and each
# is a fresh process that loads LibTorch's CUDA library and makes a CUDA context. On a GPU with room for
# several caps at once (each variant is capped as a T4, 14.3 GiB; four of them are 57 GiB of an H200's
# 139), no neighbour can take what a variant's cap allows it, so the catalog runs as OOMGUARD_CUDA_SHARDS
# runs side by side (4 where the GPU has 80 GiB or more, else 1), each over a share of the scenario files,
# and their results are joined. Only the host-to-device copies' timings can feel the neighbours.
shards="${OOMGUARD_CUDA_SHARDS:-$( [ "${gpu_mib:-0}" -ge 81920 ] 2>/dev/null && echo 4 || echo 1 )}"
shard_pids=()
for i in $(seq 1 "$shards"); do
  step "cuda-$i" 240 "$og" run --backend cuda --shard "$i/$shards" --json "$out/cuda-$i.json" & shard_pids+=($!)
done
wait "${shard_pids[@]}"
step cuda 30 python3 "$root/ci/gpu_merge_results.py" "$out/cuda.json" $(seq -f "$out/cuda-%g.json" 1 "$shards")
# The OOM boundary on the GPU: where a batch stops fitting on the real allocator.
step fit-cuda 120 "$og" fit "$fit_scenario" --cards "$fit_cards" --max "$fit_max" --backend cuda \
  --json "$out/fit-cuda.json"
# The Python package on the GPU: oomguard.measure(backend="cuda") against cpu and card mode, in one
# process and as ranks of the fake group. Its _core must match this Python's version (Note [A _core per
# Python], ci/gpu_bundle.sh): without one, the step says which it has and which it needs.
PYTHONPATH="$bundle/python${PYTHONPATH:+:$PYTHONPATH}" step python-cuda 240 "$py" "$root/ci/gpu_python_check.py" "$out"
# The model corpus (torchvision's convolution nets, a ViT, GPT blocks, the fast path, an LSTM) on the GPU
# against card mode: ci/gpu_corpus_check.py.
PYTHONPATH="$bundle/python${PYTHONPATH:+:$PYTHONPATH}" step corpus 200 "$py" "$root/ci/gpu_corpus_check.py" "$out"
wait "$host_side"

# From OUT, so that the table's columns are named by file (meta.json, meta-card.json), not by path.
(cd "$out" && step fidelity 60 "$og" compare cpu.json meta.json meta-card.json cuda.json --md fidelity.md)
step fit-boundary 60 python3 "$root/ci/gpu_fit_boundary.py" "$out"
python3 "$root/ci/gpu_summary.py" "$out" "$(( SECONDS - started ))" > "$out/summary.md"
cat "$out/summary.md"
# A device run returns a few files only: OOMGUARD_CHECK_PACK=DIR gets summary.md and all of OUT as one archive.
if [ -n "${OOMGUARD_CHECK_PACK:-}" ]; then
  mkdir -p "$OOMGUARD_CHECK_PACK" && cp "$out/summary.md" "$OOMGUARD_CHECK_PACK/" &&
    tar czf "$OOMGUARD_CHECK_PACK/gpu-check.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
fi
# A GPU whose *OnGpu tests skipped is a broken check (no libcudart, no device visible to the binaries),
# not a pass. (CudaNcclGroup.WithoutAGpu... skips where a GPU is visible, as it should.)
if [ -n "$gpu" ] && { [ "$tests_rc" != 0 ] || grep -q '^\[  SKIPPED \] [A-Za-z]*OnGpu\.' "$out/gpu-tests.txt"; }; then exit 1; fi
exit 0
