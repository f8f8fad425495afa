#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs the built-in scenario catalog on the cpu
# backend at the default card (T4), compared with the committed baselines (scenarios/baselines/),
# writing build/results.json, build/report.html, build/summary.md and build/junit.xml.
# Extra arguments go to `oomguard run` (e.g. --card a10, --cap 12GiB, --jobs 2, --filter 'h2d*').
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/ci/build.sh" >/dev/null
build="${OOMGUARD_BUILD_DIR:-$root/build}"
# The defaults, each unless the arguments give their own (`oomguard run` takes a flag once): the
# catalog as a card is `ci/catalog.sh --backend meta --kernels cuda --card t4`.
backend=(--backend cpu) jobs=(--jobs "$(nproc)")
for arg in "$@"; do
  case "$arg" in
    --backend | --backend=*) backend=() ;;
    --jobs | --jobs=* | -j*) jobs=() ;;
  esac
done
exec "$build/oomguard" run "${backend[@]}" "${jobs[@]}" --json "$build/results.json" \
  --report html="$build/report.html" --report md="$build/summary.md" --report junit="$build/junit.xml" "$@"
