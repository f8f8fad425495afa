#!/usr/bin/env bash
# `pip install ./python` as a user does it, checked end to end: a fresh virtual environment that has
# the pinned torch (the bootstrap venv's, seen through a .pth file: no second download), the build
# backend scikit-build-core, then `pip install --no-build-isolation ./python`, an import, a measurement
# and the pytest plugin found through its entry point. The wheel builds cpu and meta only
# (python/pyproject.toml). Not part of the test command: it compiles the floors a second time
# (without the cuda backend), which ccache makes a few minutes once warm.
#   ci/python_package.sh [VENV_DIR]     # default: a temporary folder, removed afterwards
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/ci/pins.env"
torch_python="$("$root/ci/bootstrap.sh")"
venv="${1:-}"
if [ -z "$venv" ]; then
  venv="$(mktemp -d)"; trap 'rm -rf "$venv"' EXIT
fi
python3 -m venv "$venv"
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$torch_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/pinned-torch.pth"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "scikit-build-core==$SCIKIT_BUILD_CORE_VERSION"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation "$root/python"
cd "$venv"  # away from the checkout: the installed package, not python/oomguard, is imported
"$venv/bin/python" - <<'PY'
import torch, oomguard
with oomguard.measure(cap="1GiB") as m:
    x = torch.ones(1024, 256)  # 1 MiB
    y = x * 2  # the 8-byte tensor Python wraps the 2 in is host memory (Note [Python's wrapped numbers])
print(f"installed oomguard: peak {m.result.peak_bytes} B")
assert m.result.peak_bytes == 2 * 1024 * 256 * 4, m.result.peak_bytes
PY
"$venv/bin/python" -m pytest --help | grep -q -- "--oomguard" || { echo "python_package: the pytest plugin is not registered" >&2; exit 1; }
echo "python_package: pip install ./python, import, a measurement and the pytest plugin: OK"
