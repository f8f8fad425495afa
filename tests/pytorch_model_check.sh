#!/usr/bin/env bash
# The PyTorch-model example (examples/pytorch-model/) as its README section runs it: each scenario
# passes on cpu and on meta, the two backends give the same peaks, phase peaks, allocation counts and
# bytes, explain takes the file, and fit gives the 7B's table.
#   pytorch_model_check.sh OOMGUARD_EXE FOLDER   (FOLDER: the scenario files and their .pt files)
set -euo pipefail
exe="$1"
cd "$2"
"$exe" run cnn.json gpt.json --backend cpu --json cpu.json
"$exe" run cnn.json gpt.json llm-7b.json --backend meta --json meta.json
python3 - cpu.json meta.json <<'PY'
# Every number agrees, allocation by allocation: where two gradients meet (the CNN's BasicBlocks feed
# their input to conv1 and the shortcut, the decoder's residuals) meta sums in place as cpu does (Note
# [Gradient sums on meta]), and under bf16 autocast meta makes cpu's float32 copies of a bf16 operand
# of a mixed-dtype op (Note [Operands promoted on cpu]).
import json, sys
def numbers(path):
    out = {}
    for s in json.load(open(path))["scenarios"]:
        for v in s["variants"]:
            m = v["measurement"]
            out[(s["name"], v["name"])] = (m["peak_bytes"], [(p["phase"], p["peak_bytes"]) for p in m["phase_peaks"]],
                                           m["alloc_count"], m["allocated_bytes_total"])
    return out
cpu, meta = numbers(sys.argv[1]), numbers(sys.argv[2])
failed = 0
for key, numbers_on_cpu in cpu.items():
    same = meta[key] == numbers_on_cpu
    failed += not same
    print(f"{key[0]}/{key[1]}: peak {numbers_on_cpu[0]} / {meta[key][0]}, allocations {numbers_on_cpu[2]} / "
          f"{meta[key][2]}, {'same' if same else 'DIFFERENT'}")
    if not same:
        print(f"  cpu  {numbers_on_cpu}\n  meta {meta[key]}")
sys.exit(1 if failed else 0)
PY
explained="$("$exe" explain gpt.json --backend cpu)"
grep -q "^Measured now (gpt.json)" <<<"$explained" || { echo "explain FILE did not measure the file" >&2; exit 1; }
out="$("$exe" fit llm-7b.json --knob batch --backend meta --cards t4,a100-80gb,h100)"
echo "$out"
grep -Eq "^h100 +78.79 GiB +[0-9]+ \(" <<<"$out" || { echo "fit found no batch for the H100" >&2; exit 1; }
