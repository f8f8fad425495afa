#!/usr/bin/env bash
# Packs what the GPU check needs from this machine's build into gpu-bundle/ (gitignored), small enough
# to carry to a GPU machine that has torch 2.11 but no compiler and no network: the stripped CLI and
# test binaries (a few MB; with debug info they are ~150 MB). They find LibTorch through
# LD_LIBRARY_PATH there (the wheel's libraries are ABI-compatible), which ci/gpu_check.sh sets.
#   ci/gpu_bundle.sh            # after ci/build.sh
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
rm -rf "$bundle" && mv "$bundle.tmp" "$bundle"
du -sh "$bundle"
