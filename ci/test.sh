#!/usr/bin/env bash
# The test command: installs what is missing (ci/bootstrap.sh), builds, and runs the GoogleTest suite
# through CTest. Safe to run from any directory and on a fresh machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The LibTorch-free CTest configures a build of its own: let ccache hit across clones there too.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=pch_defines,time_macros
"$root/ci/build.sh"
build="${OOMGUARD_BUILD_DIR:-$root/build}"
ctest --test-dir "$build" --output-on-failure --parallel "$(nproc)"
