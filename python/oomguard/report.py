"""The pytest plugin's records, verdicts and summary (no pytest here).

A record is one test's numbers as a plain dict (record_of): what --oomguard-json writes, what a forked
test's child sends its parent as JSON, and what the C++ core reads back to compare with a baseline and
to write the CLI's reports (oomguard._core.compare_with_baseline, update_baselines, write_report).
"""
from oomguard._core import format_bytes


def bytes_text(n):
    """2097152 -> "2.00 MiB (2097152 bytes)", as the C++ matchers' messages write a size (DescribeBytes)."""
    return f"{format_bytes(n)} ({n} bytes)"


def names_of_test(nodeid):
    """A test's scenario and variant, as baseline files and reports name them: the module's path without
    .py, dotted ("tests/test_models.py" -> "tests.test_models"), and the rest of the node id
    ("TestX::test_y[2]")."""
    path, _, rest = nodeid.partition("::")
    module = path[:-3] if path.endswith(".py") else path
    return module.replace("/", ".").replace("\\", "."), rest or path


# The model's numbers a record keeps (_core.CudaModel's attributes): the Markdown's `reserved` column.
CUDA_MODEL_FIELDS = ("allocated_peak_bytes", "reserved_peak_bytes", "requested_peak_bytes", "segments_peak",
                     "alloc_retries", "ooms", "decides", "allocated_at_start_bytes", "reserved_at_start_bytes")

# The GPU's own allocator's numbers (backend "cuda", _core.CudaAllocator's attributes).
CUDA_FIELDS = ("allocated_peak_bytes", "reserved_peak_bytes", "active_peak_bytes", "requested_peak_bytes",
               "alloc_retries", "ooms", "allocated_at_start_bytes", "reserved_at_start_bytes")


def record_of(nodeid, result, duration_ms=0.0):
    """One test's numbers, from its _core.Measurement."""
    scenario, variant = names_of_test(nodeid)
    return {
        "test": nodeid,
        "scenario": scenario,
        "variant": variant,
        "outcome": result.outcome,
        "error": result.error,
        "backend": result.backend,
        "card": result.card,
        "cap_bytes": result.cap_bytes,
        "kernels": result.kernels,
        "world": result.world,
        "rank": result.rank,
        "process_group": result.process_group,
        "peak_bytes": result.peak_bytes,
        "peak_phase": result.peak_phase,
        "phase_peak_bytes": dict(result.phase_peak_bytes),
        "live_at_peak_by_phase": [list(p) for p in result.live_at_peak_by_phase],
        "alloc_count": result.alloc_count,
        "live_after_iteration": list(result.live_after_iteration),
        "iteration_peak_bytes": list(result.iteration_peak_bytes),
        "live_growth_per_iteration_bytes": result.live_growth_per_iteration_bytes,
        "leak": result.leak,
        "breakdown": result.breakdown,
        "cuda_model": None if result.cuda_model is None else {
            name: getattr(result.cuda_model, name) for name in CUDA_MODEL_FIELDS},
        "cuda": None if result.cuda is None else {name: getattr(result.cuda, name) for name in CUDA_FIELDS},
        "warnings": list(result.warnings),
        "steady_state": result.steady_state,
        "diagnoses": [{"kind": d.kind, "severity": d.severity, "bytes": d.bytes, "per": d.per, "phase": d.phase,
                       "where": d.where, "amount": d.amount, "message": d.message, "fix": d.fix}
                      for d in result.diagnoses],
        "oom": None if result.oom is None else {
            "phase": result.oom.phase, "requested_bytes": result.oom.requested_bytes,
            "live_bytes": result.oom.live_bytes, "injected": result.oom.injected,
            "live_by_category": result.oom.live_by_category},
        "injection": None if result.injection is None else {
            "spec": result.injection.spec, "requests_seen": result.injection.requests_seen,
            "failures": [{"allocation_index": f.allocation_index, "bytes": f.bytes, "phase": f.phase,
                          "policy": f.policy} for f in result.injection.failures]},
        "duration_ms": duration_ms,
    }


def failures_of(record, checks):
    """The marker's checks that the record fails, one message each (none: the test passes)."""
    failures = []
    limit = checks["peak_at_most"]
    if limit is not None and record["peak_bytes"] > limit:
        failures.append(f"oomguard: peak {bytes_text(record['peak_bytes'])} in {record['peak_phase']} is over "
                        f"peak_at_most={checks['peak_at_most_text']!r}: {bytes_text(limit)}")
    growth = int(record["live_growth_per_iteration_bytes"] or 0)  # None without m.iterations()
    if checks["no_leak"] and record["leak"] and growth > checks.get("leak_at_most", 0):
        allowed = (f", over leak_at_most={checks['leak_at_most_text']!r} ({checks['leak_at_most']} bytes)"
                   if checks.get("leak_at_most_text") is not None else "")
        failures.append(f"oomguard: leak: live bytes grow by {growth} bytes per iteration{allowed} "
                        f"(live after each iteration: {', '.join(str(b) for b in record['live_after_iteration'])})")
    injection = record.get("injection")
    if injection and not injection["failures"]:  # as the CLI's verdict fails a variant for it
        failures.append(f"oomguard: inject={injection['spec']!r} never fired: it saw {injection['requests_seen']} "
                        "allocation requests and failed none (a fault that never fires tests nothing)")
    if checks["no_pitfalls"]:
        for d in record["diagnoses"]:
            if d["severity"] == "pitfall":
                failures.append(f"oomguard: pitfall {d['kind']} ({d['amount']}): {d['message']}\n  fix: {d['fix']}"
                                + measured_text(d, record))
    return failures


def measured_text(diagnosis, record):
    """The measured fix's line (--oomguard-diagnose, Note [The measured fix in pytest]), or ""."""
    measured = diagnosis.get("measured")
    if not measured:
        return ""
    growth = measured["live_growth_per_iteration_bytes"]
    text = (f"\n  measured: with {measured['fix']}: {measured['outcome']}, peak {bytes_text(measured['peak_bytes'])} "
            f"(now {bytes_text(record['peak_bytes'])})")
    if growth is not None and record["live_growth_per_iteration_bytes"] is not None:
        text += (f", live growth {int(growth)} bytes per iteration "
                 f"(now {int(record['live_growth_per_iteration_bytes'])})")
    return text


def junit_properties(record, comparison):
    """The numbers as JUnit <property> pairs (pytest's user_properties), names prefixed oomguard_."""
    props = [("oomguard_peak_bytes", record["peak_bytes"]), ("oomguard_peak_phase", record["peak_phase"])]
    props += [(f"oomguard_phase_peak_bytes.{phase}", b) for phase, b in sorted(record["phase_peak_bytes"].items())]
    props.append(("oomguard_live_after_iteration", ",".join(str(b) for b in record["live_after_iteration"])))
    growth = record["live_growth_per_iteration_bytes"]
    props.append(("oomguard_live_growth_per_iteration_bytes", "" if growth is None else growth))
    props.append(("oomguard_leak", str(bool(record["leak"])).lower()))
    props.append(("oomguard_alloc_count", record["alloc_count"]))
    props.append(("oomguard_diagnoses", ",".join(d["kind"] for d in record["diagnoses"])))
    if comparison is not None:
        props.append(("oomguard_baseline", comparison["verdict"]))
        peak = next((m for m in comparison["metrics"] if m["metric"] == "peak_bytes"), None)
        if peak is not None:
            props.append(("oomguard_baseline_peak_bytes", peak["baseline"]))
    return props


def measured_on(record):
    """Whose numbers a row's are: "cpu", "meta, cuda sm_75 kernels", "meta, rank 0 of 4" (a test's marker
    says it, but a table of many tests read without it mixed card mode's and ranks' peaks with cpu's)."""
    where = [record["backend"]]
    if record["backend"] == "meta" and record.get("kernels", "cpu") not in ("", "cpu"):
        where.append(f"{record['kernels']} kernels")
    if record.get("process_group"):
        where.append(f"rank {record['rank']} of {record['world']}")
    return ", ".join(where)


def summary_lines(records):
    """The table at the end of a run: tests by peak, highest first."""
    rows = sorted(records, key=lambda r: -r["peak_bytes"])
    width = max(len(r["test"]) for r in rows)
    lines = [f"{'test':<{width}}  {'peak bytes':>14}  {'peak':>12}  phase        outcome   measured on"]
    for r in rows:
        lines.append(f"{r['test']:<{width}}  {r['peak_bytes']:>14}  {format_bytes(r['peak_bytes']):>12}  "
                     f"{r['peak_phase']:<11}  {r['outcome']:<8}  {measured_on(r)}")
    return lines


def baseline_lines(compared, baselines_dir, strict, updating):
    """What the baselines said of the tests that passed them, for the end of the run: (nodeid, comparison)
    pairs in; improvements (with their numbers) and tests without a baseline out, one line each (none
    while updating)."""
    lines = []
    if updating:  # the update's own lines say what it recorded
        return lines
    for nodeid, c in compared:
        if c["verdict"] == "improved":
            better = "; ".join(m["text"] for m in c["metrics"] if m["verdict"] == "improved")
            lines.append(f"improved: {nodeid}: {better}")
    new = [nodeid for nodeid, c in compared if c["verdict"] == "new"]
    if new:
        lines.append(f"no baseline in {baselines_dir} for {len(new)} test(s): {', '.join(new)}")
    if lines:
        lines.append("record the numbers with --oomguard-update-baselines" +
                     ("; --oomguard-strict fails a test without a baseline" if new and not strict else ""))
    return lines
