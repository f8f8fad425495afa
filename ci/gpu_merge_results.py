"""Joins the results files of a catalog run made in shards (`oomguard run --shard i/N`, ci/gpu_check.sh's
cuda run) into one, as one run would have written it: the scenarios of every shard in name order, the
totals added up, the durations those of the longest shard. Missing or unreadable shards are named on
stderr and left out; exit 1 if none could be read.

    python3 ci/gpu_merge_results.py OUT.json SHARD.json...
"""
import json
import sys


def main():
    out, paths = sys.argv[1], sys.argv[2:]
    shards = []
    for path in paths:
        try:
            with open(path) as f:
                shards.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"gpu_merge_results: {path}: {type(e).__name__}: {e}", file=sys.stderr)
    if not shards:
        return 1
    merged = dict(shards[0])
    merged["scenarios"] = sorted((s for shard in shards for s in shard.get("scenarios", [])), key=lambda s: s["name"])
    totals = {}
    for shard in shards:
        for key, value in shard.get("totals", {}).items():
            totals[key] = totals.get(key, 0) + value if isinstance(value, (int, float)) else value
    merged["totals"] = totals
    merged["duration_ms"] = max(shard.get("duration_ms", 0.0) for shard in shards)
    with open(out, "w") as f:
        json.dump(merged, f, indent=2)
    print(f"joined {len(shards)} of {len(paths)} shards: {len(merged['scenarios'])} scenarios, "
          + ", ".join(f"{n} {k}" for k, n in sorted(totals.items())))
    return 0 if len(shards) == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main())
