#!/usr/bin/env bash
# The eager check (tests/pytorch_eager_check.py) as a user runs it on a scenario of their own: a
# folder with the scenario (an MSE loss, no data.classes) and its .pt, the Python class through
# EAGER_CHECK_MODELS. It passes with Python's longer-lived locals itemised as a known difference,
# writes nothing into the folder (--out keeps the results elsewhere), and stops with exit code 2 and
# the file and key at fault on bad input.
#
#   pytorch_eager_check_user.sh PYTHON OOMGUARD FIXTURES SCRATCH
set -uo pipefail
python=$1 oomguard=$2 fixtures=$3 scratch=$4
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rm -rf "$scratch" && mkdir -p "$scratch/mine" || exit 1
cp "$fixtures/skip_mse.json" "$fixtures/skip_mse.pt" "$scratch/mine/" || exit 1
export EAGER_CHECK_MODELS="skip_mse.pt=$here/torchscript/make_fixtures.py:SkipMlp"
check() { "$python" "$here/pytorch_eager_check.py" "$oomguard" "$scratch/mine" "$@"; }
fail() { printf 'FAILED: %s\n' "$*"; exit 1; }

out=$(check skip_mse.json fixed skip_mse.json eval_without_no_grad 2>&1); rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || fail "the check exited with $rc, expected 0"
grep -q "^  known difference: Python keeps a forward's local variables until it returns" <<<"$out" ||
  fail "Python's longer-lived locals are not itemised as a known difference"
[ "$(ls "$scratch/mine" | tr '\n' ' ')" = "skip_mse.json skip_mse.pt " ] ||
  fail "the check wrote into the scenario's folder: $(ls "$scratch/mine" | tr '\n' ' ')"

out=$(check --out "$scratch/results" skip_mse.json fixed 2>&1) || fail "--out: exit $?: $out"
[ -s "$scratch/results/torchscript-skip-mse.fixed.results.json" ] || fail "--out holds $(ls "$scratch/results")"

# Bad input: exit code 2, and the message names the file and what was expected.
expect_bad_input() {
  local expected=$1; shift
  out=$(check "$@" 2>&1); rc=$?
  [ $rc -eq 2 ] || fail "$* exited with $rc, expected 2: $out"
  [ "$out" = "$expected" ] || fail "$*: the message is '$out', expected '$expected'"
}
expect_bad_input "pytorch_eager_check: $scratch/mine/skip_mse.json: no variant 'pitfall'; it has fixed, eval_without_no_grad" \
  skip_mse.json pitfall
sed 's/"iterations": 2,/"iterations": 2, "accumulate": 2,/' "$scratch/mine/skip_mse.json" > "$scratch/mine/accumulate.json"
expect_bad_input "pytorch_eager_check: $scratch/mine/accumulate.json, variant fixed: loop.accumulate is 2; the eager check mirrors only 1" \
  accumulate.json fixed
echo "the eager check runs on a user's MSE scenario, itemises the lifetime difference and refuses bad input"
