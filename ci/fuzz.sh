#!/usr/bin/env bash
# Fuzzes the parsers for longer than CTest's Fuzz.* tests do: builds the clang tree of fuzz/ into
# build/fuzzing (under $OOMGUARD_BUILD_DIR when set) and runs each target for SECONDS (default 600)
# in libFuzzer's fork mode with $OOMGUARD_FUZZ_JOBS processes (default 2), going on past a finding.
#   ci/fuzz.sh [SECONDS [TARGET...]]     targets: scenario_loader check_expression baseline_reader cap_inject
# Each target's corpus grows in build/fuzzing/corpus/TARGET across runs, seeded from the catalog.
# Prints the inputs executed per target; exits 1 when a target found a crash, leak, timeout or
# out-of-memory input, each saved under build/fuzzing/findings/TARGET/ and named in the output.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-600}"
shift $(($# > 0 ? 1 : 0))
jobs="${OOMGUARD_FUZZ_JOBS:-2}"
"$root/ci/bootstrap.sh" >/dev/null  # clang and libFuzzer (libclang-rt-dev)
tree="${OOMGUARD_BUILD_DIR:-$root/build}/fuzzing"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$tree" "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ -DOOMGUARD_WITH_TORCH=OFF \
  -DOOMGUARD_FUZZERS=ON -DOOMGUARD_BUILD_TESTS=OFF -DOOMGUARD_INSTALL=OFF >/dev/null
cmake --build "$tree" --target oomguard_fuzzers --parallel "$(nproc)"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

found=0
summary=()
# fuzzers.tsv (fuzz/CMakeLists.txt): name, executable, dictionary, seed folder, max_len.
while IFS=$'\t' read -r name exe dict seeds max_len; do
  if (($# > 0)) && [[ " $* " != *" $name "* ]]; then continue; fi
  corpus="$tree/corpus/$name" findings="$tree/findings/$name" log="$tree/logs/$name.log"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  before="$(ls "$findings" | wc -l)"
  echo "fuzz: $name for ${seconds}s, $jobs jobs (log: $log)"
  # -ignore_*: go on after a finding, so one run reports them all; each is kept in $findings.
  "$exe" -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$seconds" \
    -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -dict="$dict" -artifact_prefix="$findings/" \
    "$corpus" "$seeds" >"$log" 2>&1 || true
  # Fork mode's status lines: "#RUNS: cov: ... oom/timeout/crash: O/T/C time: ...".
  last="$(grep -E '^#[0-9]+: ' "$log" | tail -1 || true)"
  runs="${last%%:*}" runs="${runs#\#}"
  after="$(ls "$findings" | wc -l)"
  summary+=("$name: ${runs:-0} inputs executed, corpus $(ls "$corpus" | wc -l) files, $((after - before)) new findings")
  if ((after > before)); then
    found=1
    ls -t "$findings" | head -n $((after - before)) | sed "s|^|fuzz: $name found: $findings/|"
  fi
done <"$tree/fuzz/fuzzers.tsv"

printf 'fuzz: %s\n' "${summary[@]}"
if ((found)); then
  echo "fuzz: reproduce one with: $tree/fuzz/TARGET_fuzzer FILE (UBSAN_OPTIONS=print_stacktrace=1)"
  exit 1
fi
