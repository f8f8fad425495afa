#!/usr/bin/env bash
# Configures and builds oomguard into build/ (or $OOMGUARD_BUILD_DIR), after ci/bootstrap.sh.
# Extra arguments go to CMake's configure step, e.g. -DOOMGUARD_WITH_CUDA=OFF.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="$("$root/ci/bootstrap.sh")"
build="${OOMGUARD_BUILD_DIR:-$root/build}"
# ccache hits across clones in other folders (CI's fresh clone reuses this machine's cache): paths
# are hashed relative to the checkout.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=pch_defines,time_macros
generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ] || [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DOOMGUARD_TORCH_PYTHON="$python" "$@" >/dev/null
fi
cmake --build "$build" --parallel "$(nproc)"
