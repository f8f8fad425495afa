#!/usr/bin/env bash
# The overhead goals judged by instruction counts (Note [Counting instructions],
# bench/instruction_counts.cpp): runs build/bench/oomguard_instructions under valgrind's callgrind
# and prints, for each pair of regions, both counts and their ratio. The same binary gives the same
# counts on every run; a few minutes on 2 cores (valgrind runs LibTorch about 50x slower).
#   ci/instructions.sh [OUT.json [FAMILIES]]  # OUT.json: the counts and ratios as JSON as well ("" for none);
#                                            # FAMILIES: only these, e.g. meta_7b or alloc,mlp_step
# OOMGUARD_CALLGRIND_DIR=DIR keeps the dumps there, for callgrind_annotate DIR/callgrind.out.N.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${OOMGUARD_BUILD_DIR:-$root/build}"
command -v valgrind >/dev/null || { echo "valgrind is not installed (Debian package valgrind; ci/bootstrap.sh)" >&2; exit 2; }
[ -x "$build/bench/oomguard_instructions" ] || { echo "no $build/bench/oomguard_instructions: run ci/build.sh" >&2; exit 2; }
work="${OOMGUARD_CALLGRIND_DIR:-}"
if [ -z "$work" ]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$work/callgrind.out" \
  "$build/bench/oomguard_instructions" ${2:+"$2"} >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
# Each dump: "desc: Trigger: Client Request: NAME" and "totals: IR" (or "summary: IR").
for f in "$work"/callgrind.out.*; do
  awk '/^desc: Trigger: Client Request: /{sub(/^desc: Trigger: Client Request: /, ""); name=$0}
       /^(totals|summary): /{ir=$2} END{if (name != "") print name, ir}' "$f"
done | sort >"$work/counts"
# Pairs: the first side of each region family is the baseline, the others its candidates.
awk -v json="${1:-}" '
  { np = split($1, p, "/"); family = p[1]; for (i = 2; i < np; ++i) family = family "/" p[i];
    side = p[np]; ir[$1] = $2; if (!(family in seen)) { seen[family] = 1; order[++n] = family } sides[family] = sides[family] " " side }
  END {
    base["alloc/64"] = "default"; base["alloc/4096"] = "default"; base["alloc/1048576"] = "default"
    base["mlp_step"] = "default"; base["meta_7b"] = "plain"; base["cpu_mlp_variant"] = "bare"
    printf "%-32s %16s %16s %8s\n", "region", "baseline Ir", "candidate Ir", "ratio"
    out = "{"
    for (k = 1; k <= n; ++k) {
      f = order[k]; b = base[f]; m = split(sides[f], s, " ")
      for (j = 1; j <= m; ++j) {
        if (s[j] == b) continue
        r = ir[f "/" s[j]] / ir[f "/" b]
        printf "%-32s %16d %16d %7.4fx\n", f "/" s[j] " vs " b, ir[f "/" b], ir[f "/" s[j]], r
        out = out (out == "{" ? "" : ", ") sprintf("\"%s/%s\": {\"baseline\": \"%s\", \"baseline_ir\": %d, \"ir\": %d, \"ratio\": %.6f}", f, s[j], b, ir[f "/" b], ir[f "/" s[j]], r)
      }
    }
    if (json != "") { print out "}" > json }
  }' "$work/counts"
