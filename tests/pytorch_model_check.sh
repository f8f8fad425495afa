#!/usr/bin/env bash
# The PyTorch-model example (examples/pytorch-model/) as its README section runs it: each scenario
# passes on cpu and on meta, the two backends give the same peaks, phase peaks and allocation counts
# to the byte, explain takes the file, and fit gives the 7B's table.
#   pytorch_model_check.sh OOMGUARD_EXE FOLDER   (FOLDER: the scenario files and their .pt files)
set -euo pipefail
exe="$1"
cd "$2"
"$exe" run cnn.json gpt.json --backend cpu --json cpu.json
"$exe" run cnn.json gpt.json llm-7b.json --backend meta --json meta.json
python3 - cpu.json meta.json <<'PY'
# Note [Gradient sums on meta] (tests/same_bytes.h): where two gradients meet (a tensor used
# twice), cpu sums in place and meta allocates the sum: one allocation more per meeting on meta, of
# that gradient's size, at no peak. Per iteration: the CNN's three BasicBlocks each feed their input
# to conv1 and the shortcut ([32,16,16,16], [32,16,16,16], [32,32,8,8] floats); the decoder's two
# blocks each add two residuals ([8, 64, 64] floats).
# Under bf16 autocast (the *_autocast variants) the CNN's gradients meet in bf16: the same sums at half
# the bytes. The decoder adds bf16 branches to its float32 residual stream, and cpu's TensorIterator
# makes a float32 copy of a bf16 operand of a mixed-dtype elementwise op where meta's makes none: its
# peak and every phase's peak agree, its allocation counts do not (not mirrored yet).
import json, sys
SUMS = {"pytorch-cnn": (3, 4 * (32 * 16 * 16 * 16 * 2 + 32 * 32 * 8 * 8)), "pytorch-gpt": (4, 4 * 4 * 8 * 64 * 64)}
def numbers(path):
    out = {}
    for s in json.load(open(path))["scenarios"]:
        for v in s["variants"]:
            m = v["measurement"]
            out[(s["name"], v["name"])] = (m["peak_bytes"], [(p["phase"], p["peak_bytes"]) for p in m["phase_peaks"]],
                                           m["alloc_count"], m["allocated_bytes_total"], len(m["iterations"]))
    return out
cpu, meta = numbers(sys.argv[1]), numbers(sys.argv[2])
failed = 0
for key, (peak, phases, allocs, total, iterations) in cpu.items():
    m_peak, m_phases, m_allocs, m_total, _ = meta[key]
    sums, sum_bytes = SUMS[key[0]]
    same = peak == m_peak and phases == m_phases and m_allocs - allocs == sums * iterations and \
        m_total - total == sum_bytes * iterations
    if "autocast" in key[1] and key[0] == "pytorch-cnn":
        same = peak == m_peak and phases == m_phases and m_allocs - allocs == sums * iterations and \
            m_total - total == sum_bytes // 2 * iterations
    elif "autocast" in key[1]:
        same = peak == m_peak and phases == m_phases
    failed += not same
    print(f"{key[0]}/{key[1]}: peak {peak} / {m_peak}, allocations {allocs} / {m_allocs} "
          f"(meta +{sums} x {iterations} gradient sums{'; not compared: mixed-dtype copies' if 'autocast' in key[1] and key[0] != 'pytorch-cnn' else ''}), "
          f"{'same' if same else 'DIFFERENT'}")
    if not same:
        print(f"  cpu  {phases}\n  meta {m_phases}")
sys.exit(1 if failed else 0)
PY
explained="$("$exe" explain gpt.json --backend cpu)"
grep -q "^Measured now (gpt.json)" <<<"$explained" || { echo "explain FILE did not measure the file" >&2; exit 1; }
out="$("$exe" fit llm-7b.json --knob batch --backend meta --cards t4,a100-80gb,h100)"
echo "$out"
grep -Eq "^h100 +78.79 GiB +[0-9]+ \(" <<<"$out" || { echo "fit found no batch for the H100" >&2; exit 1; }
