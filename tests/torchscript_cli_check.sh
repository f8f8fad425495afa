#!/usr/bin/env bash
# Broken TorchScript files as run, explain and fit meet them (issue 35, D19 and D20): each command exits
# 2 with the file's message. fit measures in its own process, where an abort or a stack overflow used
# to end the whole command (rc 134, 139) with no message.
#   torchscript_cli_check.sh OOMGUARD_EXE FIXTURES SCRATCH   (FIXTURES: make_fixtures.py's folder)
set -uo pipefail
exe="$1" fixtures="$2" scratch="$3"
rm -rf "$scratch" && mkdir -p "$scratch"
failed=0
expect() {  # expect FILE MESSAGE: every command exits 2 and prints MESSAGE
  local file="$1" message="$2"
  cat >"$scratch/${file%.pt}.json" <<JSON
{"name": "broken", "summary": "a broken module file", "model": {"torchscript": "$fixtures/$file"},
 "data": {"batch": 8, "shape": [16]}, "loop": {"loss": "mse"}, "variants": {"a": {}}}
JSON
  for command in "run" "explain" "fit --cap 16MiB"; do
    # shellcheck disable=SC2086
    out="$("$exe" $command "$scratch/${file%.pt}.json" 2>&1)"
    rc=$?
    if [ "$rc" != 2 ] || [[ "$out" != *"$message"* ]]; then
      echo "FAIL: $command on $file: exit $rc (expected 2), output:"
      echo "$out" | head -20
      failed=1
    fi
  done
}
expect syntax_error.pt "syntax_error.pt: not a TorchScript module torch::jit::load can read (expected ) but found 'arrow' here:"
expect global_os_system.pt "global_os_system.pt: not a TorchScript module torch::jit::load can read (Unknown type name 'os.system':"
expect deep_list.pt "deep_list.pt: attribute \"history\" holds lists, tuples, dicts or objects nested more than 64 deep"
[ "$failed" = 0 ] && echo "run, explain and fit: exit 2 with the file's message, for each broken file"
exit "$failed"
