#!/usr/bin/env bash
# The test command: installs what is missing (ci/bootstrap.sh), builds, and runs the GoogleTest suite
# through CTest. Safe to run from any directory and on a fresh machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/ci/build.sh"
build="${OOMGUARD_BUILD_DIR:-$root/build}"
ctest --test-dir "$build" --output-on-failure --parallel "$(nproc)"
