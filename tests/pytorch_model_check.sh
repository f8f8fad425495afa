#!/usr/bin/env bash
# The PyTorch-model example (examples/pytorch-model/) as its README section runs it: each scenario
# on cpu passes (meta: once convolution and attention have meta kernels).
#   pytorch_model_check.sh OOMGUARD_EXE FOLDER   (FOLDER: the scenario files and their .pt files)
set -euo pipefail
exe="$1"
cd "$2"
"$exe" run cnn.json gpt.json --backend cpu
explained="$("$exe" explain gpt.json --backend cpu)"
grep -q "^Measured now (gpt.json)" <<<"$explained" || { echo "explain FILE did not measure the file" >&2; exit 1; }
