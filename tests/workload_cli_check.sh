#!/usr/bin/env bash
# The example's program and the plain tool on workload scenarios, as a user meets them: exit codes
# and the first line of each message, exactly.
#   tests/workload_cli_check.sh MEMORY_CHECKS OOMGUARD SOURCE_DIR SCRATCH
set -uo pipefail
checks="$1" tool="$2" src="$3" scratch="$4"
example="$src/examples/libtorch-training/scenarios/classifier-eval-no-grad.json"
fixtures="$src/tests/workload_scenarios"
rm -rf "$scratch" && mkdir -p "$scratch" && cd "$scratch"
failed=0
expect() {  # expect NAME CODE REGEX -- command...
  local name="$1" code="$2" regex="$3"; shift 4
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  if [ "$rc" != "$code" ] || ! grep -Eq -- "$regex" <<<"$out"; then
    echo "FAIL $name: exit $rc (expected $code), output should match: $regex"; echo "$out" | tail -20; failed=1
  else
    echo "ok   $name"
  fi
}
export NO_COLOR=1
expect "the program runs its own scenario on meta" 0 "PASS +classifier-eval-no-grad" -- \
  "$checks" run --backend meta --card t4 --baselines "$scratch/baselines"
expect "list shows the workload scenario" 0 "classifier-eval-no-grad" -- "$checks" list
expect "the plain tool does not register the workload (an input error: exit 2)" 2 \
  "workload 'classifier_adam' is not registered in this program \(no workloads are registered" -- \
  "$tool" run "$example" --backend cpu
expect "a misspelt knob (an input error: exit 2)" 2 \
  "reads knob \"batch\" \(an integer\), which variant 'base' does not set; it sets \"bach\": did you mean \"batch\"\?" -- \
  "$checks" run "$fixtures/knob-typo.json" --backend cpu
expect "a layer-list key in a workload scenario (exit 2)" 2 \
  "at variants.base.data: a workload scenario builds its own model, data and loop" -- \
  "$checks" run "$fixtures/layer-keys.json" --backend cpu
expect "fit varies an integer knob" 0 "batch" -- \
  "$checks" fit classifier-eval-no-grad --knob batch --card t4 --backend meta --variant fixed --max 1000000
expect "fit --world: the example's data parallelism shards nothing, so world 1 alone is tried" 0 \
  "^per_gradient: workload 'classifier_data_parallel' holds no less as the world grows \(rank 0: 22.00 MiB at world 1, 22.00 MiB at world 2, 22.00 MiB at world 4096\)" -- \
  "$checks" fit classifier-data-parallel --world --variant per_gradient --cards t4
expect "explain measures the workload" 0 "pitfall" -- "$checks" explain classifier-eval-no-grad --backend meta
expect "the built-in catalog is still there" 0 "forgotten-no-grad" -- "$checks" list @catalog
mkdir -p "$scratch/empty"
expect "a user's program names itself in its messages" 2 "^memory_checks run: " -- \
  "$checks" run "$scratch/empty" --backend cpu
expect "fit names the misspelt knob and exits 2" 2 \
  "^memory_checks fit: .*knob-typo.json: variant 'base': workload 'classifier_adam' reads knob \"batch\"" -- \
  "$checks" fit "$fixtures/knob-typo.json" --knob hidden --backend cpu --cap 64MiB
expect "--inject fails the workload's allocation, and the OOM has a snapshot" 1 \
  "injected by oomguard: nth=40, allocation #40 in phase optimizer" -- \
  "$checks" run --backend cpu --inject nth=40 --snapshot-dir "$scratch/snapshots" --baselines "$scratch/baselines"
if [ ! -s "$scratch/snapshots/classifier-eval-no-grad.fixed.cpu.pickle" ]; then
  echo "FAIL --snapshot-dir wrote no snapshot of the workload's OOM"; failed=1
fi
exit $failed
