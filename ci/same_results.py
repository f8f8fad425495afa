#!/usr/bin/env python3
"""Whether two `oomguard run --json` results files hold the same numbers: everything but durations and
the checkout's own path must be equal. For a change that must not change behaviour (a refactoring):
    build/oomguard run --backend cpu --json before.json   # on the old commit
    build/oomguard run --backend cpu --json after.json    # on the new one
    ci/same_results.py before.json after.json
Exit 0 and "identical apart from durations" when equal; 1 with a unified diff otherwise."""
import json, sys, difflib, re
DROP = {"duration_ms", "wall_ms"}
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in DROP}
    if isinstance(x, list):
        return [strip(v) for v in x]
    if isinstance(x, str):  # the checkout's own path: different in every worktree
        return re.sub(r'^/\S*?/scenarios/', '<checkout>/scenarios/', x)
    return x
a, b = (json.dumps(strip(json.load(open(p))), indent=1, sort_keys=False).splitlines() for p in sys.argv[1:3])
d = list(difflib.unified_diff(a, b, sys.argv[1], sys.argv[2], lineterm="", n=2))
print("\n".join(d[:400]) if d else "identical apart from durations")
sys.exit(1 if d else 0)
