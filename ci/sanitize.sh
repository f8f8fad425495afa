#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer and UndefinedBehaviorSanitizer and runs it: any report
# fails. Usage:
#   ci/sanitize.sh                 # the whole suite, with LibTorch (a build of its own: long on 2 cores)
#   ci/sanitize.sh --libtorch-free # the LibTorch-free floors and their tests (the parsers, the writers)
# Extra arguments after that go to ctest (e.g. -R Baseline). The build goes to build/sanitize-MODE (or
# $OOMGUARD_SANITIZE_DIR); ccache makes a second run fast.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="$("$root/ci/bootstrap.sh")"
mode=full
if [ "${1:-}" = "--libtorch-free" ]; then mode=free; shift; fi
build="${OOMGUARD_SANITIZE_DIR:-$root/build/sanitize}-$mode"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
# vptr is left out: LibTorch is built without it, and its types cross into our code.
flags="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"
         "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" -DOOMGUARD_BUILD_BENCH=OFF -DOOMGUARD_PYTHON=OFF)
if [ "$mode" = free ]; then
  options+=(-DOOMGUARD_WITH_TORCH=OFF)
else
  options+=(-DOOMGUARD_TORCH_PYTHON="$python" -DOOMGUARD_WITH_CUDA=OFF)
fi
cmake -S "$root" -B "$build" "${generator[@]}" "${options[@]}" >/dev/null
cmake --build "$build" --parallel "$(nproc)"
# LibTorch keeps singletons alive to exit: leaks are not what this run looks for. Every other report
# aborts the test that caused it.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
if [ "$mode" = free ]; then
  "$build/tests/oomguard_plain_tests" --gtest_brief=1
else
  # The suite as CI runs it, less the tests that build trees of their own (they would not be sanitized).
  ctest --test-dir "$build" --output-on-failure --parallel "$(nproc)" -E "Package|LibTorchFree|Fuzz" "$@"
fi
echo "sanitize ($mode): clean"
