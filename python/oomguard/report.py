"""The pytest plugin's verdicts and summary, computed from a measurement (no pytest here)."""
from oomguard._core import format_bytes

GIB = 1 << 30


def bytes_text(n):
    """2147483648 -> "2147483648 bytes (2 GiB)"; 2097152 -> "2097152 bytes (0.001953 GiB)"."""
    return f"{n} bytes ({n / GIB:.4g} GiB)"


def failures_of(result, checks):
    """The marker's checks that the measurement fails, one message each (none: the test passes)."""
    failures = []
    limit = checks["peak_at_most"]
    if limit is not None and result.peak_bytes > limit:
        failures.append(f"oomguard: peak {bytes_text(result.peak_bytes)} in {result.peak_phase} is over "
                        f"peak_at_most={checks['peak_at_most_text']!r}: {bytes_text(limit)}")
    if checks["no_leak"] and result.leak:
        growth = int(result.live_growth_per_iteration_bytes)
        failures.append(f"oomguard: leak: live bytes grow by {growth} bytes per iteration "
                        f"(live after each iteration: {', '.join(str(b) for b in result.live_after_iteration)})")
    if checks["no_pitfalls"]:
        for d in result.diagnoses:
            if d.severity == "pitfall":
                failures.append(f"oomguard: pitfall {d.kind} ({d.amount}): {d.message}\n  fix: {d.fix}")
    return failures


def record_of(test, result):
    """One test's numbers, as --oomguard-json writes them."""
    return {
        "test": test,
        "outcome": result.outcome,
        "backend": result.backend,
        "card": result.card,
        "cap_bytes": result.cap_bytes,
        "peak_bytes": result.peak_bytes,
        "peak_phase": result.peak_phase,
        "phase_peak_bytes": dict(result.phase_peak_bytes),
        "live_after_iteration": list(result.live_after_iteration),
        "live_growth_per_iteration_bytes": result.live_growth_per_iteration_bytes,
        "breakdown": result.breakdown,
        "diagnoses": [{"kind": d.kind, "severity": d.severity, "amount": d.amount, "message": d.message}
                      for d in result.diagnoses],
    }


def summary_lines(records):
    """The table at the end of a run: tests by peak, highest first."""
    rows = sorted(records, key=lambda r: -r["peak_bytes"])
    width = max(len(r["test"]) for r in rows)
    lines = [f"{'test':<{width}}  {'peak bytes':>14}  {'peak':>12}  phase        outcome"]
    for r in rows:
        lines.append(f"{r['test']:<{width}}  {r['peak_bytes']:>14}  {format_bytes(r['peak_bytes']):>12}  "
                     f"{r['peak_phase']:<11}  {r['outcome']}")
    return lines
