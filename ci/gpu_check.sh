#!/usr/bin/env bash
# The GPU check (issue: the cuda backend): on a machine with a GPU and torch 2.11, run the GPU tests,
# the catalog on cuda, cpu and meta, and write the fidelity table (each variant's cpu and meta peaks
# against the cuda run's). Uses binaries from ci/gpu_bundle.sh; needs no compiler and no network.
#   ci/gpu_check.sh BUNDLE_DIR OUT_DIR
# OUT_DIR receives: version.txt, gpu-tests.txt, {cuda,cpu,meta}.json, fidelity.txt, fidelity.md.
# Exit code: that of the GPU tests, else 0 (the fidelity table is a report, read it).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$(cd "${1:?bundle dir}" && pwd)"
out="${2:?output dir}"
mkdir -p "$out"
# LibTorch from the machine's own torch; without one, the binaries fall back to their build-time path.
torch_lib="${OOMGUARD_TORCH_LIB:-$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null || true)}"
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

# cuda variants run one at a time: they share the GPU and its allocator statistics are per process
# anyway, but concurrent ones would compete for the device's memory under their caps.
"$og" run --backend cuda --jobs 1 --json "$out/cuda.json" > "$out/cuda.txt" 2>&1
"$og" run --backend cpu --jobs "$jobs" --json "$out/cpu.json" > "$out/cpu.txt" 2>&1
"$og" run --backend meta --jobs "$jobs" --json "$out/meta.json" > "$out/meta.txt" 2>&1
tail -3 "$out/cuda.txt" "$out/cpu.txt" "$out/meta.txt"
"$og" compare "$out/cpu.json" "$out/meta.json" "$out/cuda.json" --md "$out/fidelity.md" | tee "$out/fidelity.txt"
exit "$tests_rc"
