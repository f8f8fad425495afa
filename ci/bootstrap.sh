#!/usr/bin/env bash
# Installs everything oomguard needs, idempotently: quiet and fast when all is present.
#   - Debian packages: compiler toolchain pieces (clang and libFuzzer too), CLI11, nlohmann/json,
#     GoogleTest/Benchmark, ccache, valgrind.
#   - PyPI torch==$TORCH_VERSION, torchvision==$TORCHVISION_VERSION, pytest==$PYTEST_VERSION,
#     pytest-xdist==$PYTEST_XDIST_VERSION and
#     transformers==$TRANSFORMERS_VERSION (ci/pins.env) in a venv outside the
#     checkout, so every clone reuses it:
#     ${OOMGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oomguard}/torch-$TORCH_VERSION
# Prints the venv's python on the last line of stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=pins.env
source "$here/pins.env"

log() { echo "bootstrap: $*" >&2; }

debs=(cmake g++ ninja-build ccache python3-venv libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
      libxml2-utils   # xmllint: the JUnit report is validated against the JUnit schema in the tests
      valgrind        # callgrind and its header: the benchmarks' instruction counts (ci/instructions.sh)
      clang libclang-rt-dev)  # libFuzzer (libclang_rt.fuzzer) for fuzz/: CTest's Fuzz.* and ci/fuzz.sh
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >&2
fi

cache="${OOMGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oomguard}"
venv="$cache/torch-$TORCH_VERSION"
py="$venv/bin/python"
have_torch() { [ -x "$py" ] && "$py" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; }
if ! have_torch; then
  log "installing torch==$TORCH_VERSION into $venv (several GB, once per machine)"
  mkdir -p "$cache"
  [ -x "$py" ] || python3 -m venv "$venv" >&2
  "$py" -m pip install -q --disable-pip-version-check "torch==$TORCH_VERSION" >&2
  have_torch || { log "torch $TORCH_VERSION did not import from $venv"; exit 1; }
fi
have_torchvision() {
  "$py" -c "import torchvision, sys; sys.exit(torchvision.__version__.split('+')[0] != '$TORCHVISION_VERSION')" 2>/dev/null
}
if ! have_torchvision; then
  log "installing torchvision==$TORCHVISION_VERSION into $venv (torch stays $TORCH_VERSION)"
  "$py" -m pip install -q --disable-pip-version-check "torchvision==$TORCHVISION_VERSION" pillow numpy \
    "torch==$TORCH_VERSION" >&2
  have_torch && have_torchvision || { log "torchvision $TORCHVISION_VERSION did not import with torch $TORCH_VERSION"; exit 1; }
fi
have_pytest() {
  "$py" -c "import pytest, xdist, sys; sys.exit(pytest.__version__ != '$PYTEST_VERSION' or xdist.__version__ != '$PYTEST_XDIST_VERSION')" 2>/dev/null
}
if ! have_pytest; then
  log "installing pytest==$PYTEST_VERSION and pytest-xdist==$PYTEST_XDIST_VERSION into $venv (python/tests: the pytest plugin's tests)"
  "$py" -m pip install -q --disable-pip-version-check "pytest==$PYTEST_VERSION" "pytest-xdist==$PYTEST_XDIST_VERSION" \
    "torch==$TORCH_VERSION" >&2
  have_pytest || { log "pytest $PYTEST_VERSION did not import from $venv"; exit 1; }
fi
have_transformers() {
  "$py" -c "import transformers, sys; sys.exit(transformers.__version__ != '$TRANSFORMERS_VERSION')" 2>/dev/null
}
if ! have_transformers; then
  log "installing transformers==$TRANSFORMERS_VERSION into $venv (examples/python: a model TorchScript cannot compile)"
  "$py" -m pip install -q --disable-pip-version-check "transformers==$TRANSFORMERS_VERSION" "torch==$TORCH_VERSION" >&2
  have_torch && have_transformers || { log "transformers $TRANSFORMERS_VERSION did not import with torch $TORCH_VERSION"; exit 1; }
fi
echo "$py"
