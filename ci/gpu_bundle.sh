#!/usr/bin/env bash
# Packs what the GPU check needs from this machine's build into gpu-bundle/ (gitignored), small enough
# to carry to a GPU machine that has torch 2.11 but no compiler and no network: the stripped CLI and
# test binaries (a few MB; with debug info they are ~150 MB). They find LibTorch through
# LD_LIBRARY_PATH there (the wheel's libraries are ABI-compatible), which ci/gpu_check.sh sets.
#   ci/gpu_bundle.sh            # after ci/build.sh; OOMGUARD_BUNDLE_PYTHONS="python3.12 ..." (see below)
#   then, on the GPU machine:  ci/gpu_check.sh gpu-bundle OUT_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${OOMGUARD_BUILD_DIR:-$root/build}"
bundle="$root/gpu-bundle"
rm -rf "$bundle.tmp" && mkdir -p "$bundle.tmp"
strip -o "$bundle.tmp/oomguard" "$build/oomguard"
strip -o "$bundle.tmp/oomguard_tests" "$build/tests/oomguard_tests"
# The Python package as the build left it (Note [The cuda backend in Python]): its modules and _core.
mkdir -p "$bundle.tmp/python/oomguard"
cp "$build"/python/oomguard/*.py "$bundle.tmp/python/oomguard/"
for core in "$build"/python/oomguard/_core*.so; do strip -o "$bundle.tmp/python/oomguard/$(basename "$core")" "$core"; done
# And a _core for each Python in OOMGUARD_BUNDLE_PYTHONS (default a Python 3.12, pyenv's too: the lent GPU
# machines' python3): Note [A _core per Python], ci/gpu_core_for_python.py. A Python not found here is skipped,
# saying so; the GPU check's Python step then names the module it lacks.
default_pythons="$(for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
  "$candidate" -c '' 2>/dev/null && { echo "$candidate"; break; }; done)"
for other in ${OOMGUARD_BUNDLE_PYTHONS-${default_pythons:-python3.12}}; do
  if ! command -v "$other" >/dev/null || ! "$other" -c '' 2>/dev/null; then
    echo "gpu_bundle: no $other here: the bundle has no _core for it" >&2; continue
  fi
  core="$(python3 "$root/ci/gpu_core_for_python.py" "$build" "$other" "$bundle.tmp/python/oomguard")" || exit 1
  strip "$core"
done
rm -rf "$bundle" && mv "$bundle.tmp" "$bundle"
du -sh "$bundle"
