"""oomguard's pytest plugin (entry point pytest11 "oomguard"), in the style of pytest-memray:

    @pytest.mark.oomguard(card="t4", backend="cpu", peak_at_most="2 GiB", no_leak=True)
    def test_training(oomguard_measure):          # the running oomguard.measure, for m.phase(...)
        m = oomguard_measure
        ...

A marked test runs inside oomguard.measure(card=, backend=, cap=, verdict=, alloc_conf=) and fails,
with the numbers, when its peak is over peak_at_most, when its live bytes grow from iteration to
iteration (no_leak, with m.iterations(n); leak_at_most="1 KiB" tolerates that much growth per iteration,
as pytest-memray's limit_leaks does: a loss history of detached scalars grows 4 bytes each), when
oomguard diagnoses a pitfall (no_pitfalls), or when its
numbers are worse than its baseline. `--oomguard` measures every test (no cap, cpu) and prints a table
of peaks at the end; `--oomguard-json PATH` writes the numbers. A bad marker (an unknown argument, card
or size) stops the run at collection with a usage error.

Isolation: each measured test's body runs in a child forked from pytest (as `oomguard run` runs each
variant in a child of its own), inside the measurement, with one intra-op thread; the child sends its
numbers, outcome and failure text back through a pipe as JSON and leaves with os._exit, so what one
test keeps alive (a module-level tensor, the allocator's state) never reaches another's numbers. The
fixtures are set up and torn down in pytest's process: the child inherits them, and what it does to
them stays in the child. A child that dies (a signal, os._exit) or outlives --oomguard-timeout
(600 s) fails its test saying so. isolate=False in the marker, or --oomguard-no-fork, runs the test in
pytest's process instead.

Baselines: each measured test's numbers are compared with the CLI's baseline files (scenarios/FORMAT.md),
one per test module (tests/test_models.py: tests.test_models.json, a variant per test), in
--oomguard-baselines DIR (the ini option oomguard_baselines; default <rootdir>/oomguard-baselines), with
the CLI's own C++ code: exact by default, a file's "tolerance" applies. Worse beyond the tolerance fails
the test ("oomguard: regression: peak_bytes ..."); better passes, noted at the end; no baseline is a note,
and a failure under --oomguard-strict. --oomguard-update-baselines records the numbers of the tests that
passed (atomically, under the folder's lock) instead of failing on them.

Reports: the numbers go to the JUnit XML as properties (oomguard_peak_bytes, oomguard_phase_peak_bytes.<phase>,
oomguard_live_after_iteration, oomguard_leak, oomguard_diagnoses, oomguard_baseline, ...), and
--oomguard-report FORMAT=PATH (repeatable: md, html, junit, json, csv) writes the CLI's reports of the
measured tests. Under pytest-xdist the workers hand their numbers to pytest's own process, which writes
them once (Note [Under pytest-xdist]).

Faults and snapshots: the marker's inject="nth=3" (or a list) fails chosen allocations as
oomguard.measure(inject=) does; a test whose fault never fired fails. --oomguard-snapshot-dir DIR
writes the memory_viz snapshot of each measured test that fails, DIR/<module>.<test>.<backend>.pickle
as the CLI names its variants', and of every one with --oomguard-snapshot-all (Note [Snapshots of
failing tests]). Under --oomguard an unmarked test that opens its own oomguard.measure meets "a
measurement is already running": mark it instead.
"""
import contextlib
import copy
import inspect
import json
import os
import select
import signal
import sys
import time
import traceback
import warnings

import pytest
import torch

from oomguard import _core
from oomguard.measure import Measure, OomguardWarning
from oomguard.report import baseline_lines, failures_of, junit_properties, names_of_test, record_of, summary_lines

MARKER_ARGUMENTS = {"card": None, "backend": "cpu", "cap": None, "kernels": None, "verdict": None, "alloc_conf": None,
                    "peak_at_most": None, "no_leak": True, "leak_at_most": None, "no_pitfalls": False, "isolate": True,
                    "inject": None, "world": None, "rank": None}
DEFAULT_BASELINES = "oomguard-baselines"
_MEASURE = pytest.StashKey()
_CHECKS = pytest.StashKey()
_ISOLATE = pytest.StashKey()
_RUN = pytest.StashKey()


class _Run:
    """What the session measured: the records (--oomguard-json, the table), each test's result for the
    reports and the baselines' update, and the comparisons that passed (the notes at the end)."""

    def __init__(self, config):
        self.records = []
        self.tests = []  # {"nodeid", "record" (or None), "code", "reasons"}
        self.compared = []  # (nodeid, comparison) of tests whose baseline did not fail them
        self.end_lines = []
        self.started = time.monotonic()
        self.update = config.getoption("oomguard_update_baselines")
        self.strict = config.getoption("oomguard_strict")
        self.reports = config.getoption("oomguard_report") or []
        snapshot_dir = config.getoption("oomguard_snapshot_dir")
        self.snapshot_dir = str(config.invocation_params.dir / snapshot_dir) if snapshot_dir else None
        self.snapshot_all = config.getoption("oomguard_snapshot_all")
        given, ini = config.getoption("oomguard_baselines"), config.getini("oomguard_baselines")
        if given:  # relative to where pytest was started, as other paths on its command line
            self.baselines = str(config.invocation_params.dir / given)
        elif ini:  # relative to the ini file
            self.baselines = str(config.inipath.parent / ini)
        else:
            self.baselines = str(config.rootpath / DEFAULT_BASELINES)


def pytest_addoption(parser):
    group = parser.getgroup("oomguard", "GPU memory of the test's PyTorch code, measured by oomguard")
    group.addoption("--oomguard", action="store_true", default=False,
                    help="measure every test (unmarked ones on cpu, no cap) and print a table of peaks")
    group.addoption("--oomguard-json", metavar="PATH", default=None,
                    help="write each measured test's numbers to PATH as JSON")
    group.addoption("--oomguard-no-fork", action="store_true", default=False,
                    help="run measured tests in pytest's process, not each in a forked child")
    group.addoption("--oomguard-timeout", metavar="SECONDS", type=float, default=600.0,
                    help="fail a forked test whose child runs longer than this (default 600)")
    group.addoption("--oomguard-baselines", metavar="DIR", default=None,
                    help=f"the baseline files' folder (default: ini oomguard_baselines, else <rootdir>/{DEFAULT_BASELINES})")
    group.addoption("--oomguard-update-baselines", action="store_true", default=False,
                    help="record the numbers of the measured tests that pass as their baselines")
    group.addoption("--oomguard-strict", action="store_true", default=False,
                    help="fail a measured test that has no baseline")
    group.addoption("--oomguard-report", metavar="FORMAT=PATH", action="append", default=None,
                    help="write the CLI's report of the measured tests: md, html, junit, json or csv (repeatable)")
    group.addoption("--oomguard-diagnose", action="store_true", default=False,
                    help="measure the fix of a test whose evaluation keeps its graph: rerun it with every "
                         "eval phase under torch.no_grad() and say what that saves")
    group.addoption("--oomguard-snapshot-dir", metavar="DIR", default=None,
                    help="write a memory_viz snapshot of each measured test that fails to DIR "
                         "(<module>.<test>.<backend>.pickle, as oomguard run --snapshot-dir)")
    group.addoption("--oomguard-snapshot-all", action="store_true", default=False,
                    help="with --oomguard-snapshot-dir: a snapshot of every measured test, passed or not")
    parser.addini("oomguard_baselines", f"the baseline files' folder, relative to the ini file (default {DEFAULT_BASELINES})",
                  default=None)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "oomguard(card=None, backend='cpu', cap=None, kernels=None, verdict=None, alloc_conf=None, "
        "peak_at_most=None, no_leak=True, leak_at_most=None, no_pitfalls=False, isolate=True, inject=None, world=None, rank=None): "
        "run the test inside oomguard.measure (in a forked child) and fail it past the limits")
    for spec in config.getoption("oomguard_report") or []:
        error = _core.report_spec_error(spec)
        if error:
            raise pytest.UsageError(error.replace("--report", "--oomguard-report"))
    if config.getoption("oomguard_timeout") <= 0:
        raise pytest.UsageError("--oomguard-timeout: expected a number of seconds above 0")
    if config.getoption("oomguard_snapshot_all") and not config.getoption("oomguard_snapshot_dir"):
        raise pytest.UsageError("--oomguard-snapshot-all needs --oomguard-snapshot-dir DIR")
    run = config.stash[_RUN] = _Run(config)
    if run.snapshot_dir and not _is_xdist_worker(config):  # created once, before any test runs
        error = _core.snapshot_dir_error(run.snapshot_dir)
        if error:
            raise pytest.UsageError(f"--oomguard-snapshot-dir: {error}")


def _size_argument(args, name):
    """The marker's size argument `name` in bytes (None when not given), or ValueError naming it."""
    if args[name] is None:
        return None
    try:
        return _core.parse_bytes(str(args[name]))
    except ValueError as e:
        raise ValueError(f"{name}: {str(e).split(': ', 1)[1]}") from None


def _checks_of(marker, nodeid):
    """The marker's arguments, checked: (Measure, checks, isolate), or pytest.UsageError naming what is accepted."""
    where = f"{nodeid}: @pytest.mark.oomguard"
    if marker.args:
        raise pytest.UsageError(f"{where}: takes keyword arguments only ({', '.join(MARKER_ARGUMENTS)})")
    unknown = sorted(set(marker.kwargs) - set(MARKER_ARGUMENTS))
    if unknown:
        raise pytest.UsageError(f"{where}: unknown argument {unknown[0]!r}; accepted: {', '.join(MARKER_ARGUMENTS)}")
    args = {**MARKER_ARGUMENTS, **marker.kwargs}
    try:
        measure = Measure(card=args["card"], backend=args["backend"], cap=args["cap"], kernels=args["kernels"],
                          verdict=args["verdict"], alloc_conf=args["alloc_conf"], inject=args["inject"],
                          world=args["world"], rank=args["rank"])
        limit, leak_limit = _size_argument(args, "peak_at_most"), _size_argument(args, "leak_at_most")
    except (ValueError, TypeError) as e:
        raise pytest.UsageError(f"{where}: {str(e).removeprefix('oomguard.measure: ')}") from None
    if leak_limit is not None and args["no_leak"] is False:
        raise pytest.UsageError(f"{where}: leak_at_most={args['leak_at_most']!r} with no_leak=False: "
                                "give one of them (leak_at_most checks the leak, with that much growth allowed)")
    checks = {"peak_at_most": limit, "peak_at_most_text": args["peak_at_most"],
              "no_leak": bool(args["no_leak"]) or leak_limit is not None,
              "leak_at_most": leak_limit or 0, "leak_at_most_text": args["leak_at_most"],
              "no_pitfalls": bool(args["no_pitfalls"])}
    return measure, checks, bool(args["isolate"])


def pytest_collection_modifyitems(config, items):
    measure_all = config.getoption("oomguard")
    no_fork = config.getoption("oomguard_no_fork")
    for item in items:
        marker = item.get_closest_marker("oomguard")
        if marker is not None and marker.kwargs.get("backend") == "cuda" and not torch.cuda.is_available():
            # A GPU test on a runner without one is skipped, as torch's own GPU tests are, not an error.
            item.add_marker(pytest.mark.skip(reason="oomguard: backend=\"cuda\" needs a GPU, and torch sees none "
                                                    "(torch.cuda.is_available() is False)"))
        elif marker is not None:
            item.stash[_MEASURE], item.stash[_CHECKS], isolate = _checks_of(marker, item.nodeid)
            item.stash[_ISOLATE] = isolate and not no_fork
        elif measure_all:
            item.stash[_MEASURE] = Measure()
            item.stash[_ISOLATE] = not no_fork


@pytest.fixture
def oomguard_measure(request):
    """The oomguard.measure a marked test runs in (for m.phase, m.iterations, m.track, m.device)."""
    measure = request.node.stash.get(_MEASURE, None)
    if measure is None:
        pytest.fail(f"{request.node.nodeid}: the oomguard_measure fixture needs @pytest.mark.oomguard(...) "
                    "(or --oomguard)", pytrace=False)
    return measure


# ---- the forked child -----------------------------------------------------------------------------

def _failure_text(item, excinfo):
    """The exception as pytest would print it for this test (its repr_failure), else a plain traceback."""
    try:
        return str(item.repr_failure(excinfo))
    except Exception:  # noqa: BLE001 - a failure to format must still report the failure
        return "".join(traceback.format_exception(excinfo.type, excinfo.value, excinfo.tb))


def _outcome_of(item, call):
    """Runs call() and says how it ended: {"outcome": "passed" | "failed" | "skipped" | "xfailed", "text"}."""
    try:
        call()
        return {"outcome": "passed", "text": ""}
    except pytest.skip.Exception as e:
        return {"outcome": "skipped", "text": e.msg}
    except pytest.xfail.Exception as e:
        return {"outcome": "xfailed", "text": e.msg}
    except BaseException:  # noqa: BLE001 - SystemExit and KeyboardInterrupt in the body fail the test too
        return {"outcome": "failed", "text": _failure_text(item, pytest.ExceptionInfo.from_current())}


def _child(item, measure, call, write_fd):
    """In the forked child: the test body inside the measurement, the message to the parent, os._exit."""
    code = 0
    try:
        import torch

        # One intra-op thread, as the CLI's child (run/measure_child.cpp): a forked child must not run
        # OpenMP regions on the pool pytest's process started (its threads are not in the child).
        torch.set_num_threads(1)
        started = time.monotonic()
        message = _outcome_of(item, call)
        if measure.result is not None:
            message["record"] = record_of(item.nodeid, measure.result, 1000 * (time.monotonic() - started))
        message["user_properties"] = [(str(k), v if isinstance(v, (int, float, str, bool)) else str(v))
                                      for k, v in item.user_properties]
        payload = json.dumps(message).encode()
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
    except BaseException:  # noqa: BLE001 - the parent reports a child that sent nothing
        traceback.print_exc()
        code = 3
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - a closed capture stream: nothing more to say
                pass
        os._exit(code)


def _wait(pid, read_fd, timeout):
    """The child's message bytes and its wait status, or None status when it outlived `timeout` (then killed)."""
    chunks, deadline, status = [], time.monotonic() + timeout, None
    open_pipe = True
    while status is None:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_fd)
            return b"".join(chunks), None
        if open_pipe:
            ready, _, _ = select.select([read_fd], [], [], min(left, 0.1))
            if ready:
                chunk = os.read(read_fd, 1 << 16)
                open_pipe = bool(chunk)
                chunks.append(chunk)
        else:
            time.sleep(min(left, 0.01))
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            status = wait_status
    os.set_blocking(read_fd, False)
    try:  # what is left in the pipe (a grandchild holding its write end open must not stall us)
        while chunk := os.read(read_fd, 1 << 16):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    os.close(read_fd)
    return b"".join(chunks), status


def _died(status, timeout):
    if status is None:
        return (f"oomguard: the test's forked child ran past --oomguard-timeout={timeout:g} s and was killed "
                "(SIGKILL); no numbers")
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        return f"oomguard: the test's forked child died of signal {number} ({name}) before it reported; no numbers"
    return (f"oomguard: the test's forked child exited with code {os.waitstatus_to_exitcode(status)} before it "
            "reported (os._exit in the test?); no numbers")


def _run_forked(item, measure, call):
    """The test body in a forked child: the message it sent ({"outcome", "text", "record"}), or a
    failed outcome saying how the child ended without one."""
    timeout = item.config.getoption("oomguard_timeout")
    if measure.backend == "cuda" and torch.cuda.is_initialized():
        return {"outcome": "crashed", "text": (
            "oomguard: this test measures on backend=\"cuda\" in a forked child, but the pytest process has "
            "started CUDA already (a fixture, an import or an unisolated test made a CUDA tensor), and a forked "
            "child cannot use CUDA then: mark the test isolate=False, run with --oomguard-no-fork, or keep "
            "CUDA out of pytest's own process"), "record": None}
    read_fd, write_fd = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # nothing buffered before the fork is written twice
        stream.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(item, measure, call, write_fd)
    os.close(write_fd)
    try:
        data, status = _wait(pid, read_fd, timeout)
    except BaseException:  # Ctrl-C while the child runs: it goes too
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    if status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and data:
        return json.loads(data)
    return {"outcome": "crashed", "text": _died(status, timeout), "timeout": status is None}


# ---- the hook -----------------------------------------------------------------------------------

def _flags(failure):
    """A baseline failure as the C++ core words it for the CLI, with the plugin's options."""
    failure = failure.replace("(--strict)", "(--oomguard-strict)").replace("--update-baselines", "--oomguard-update-baselines")
    return f"oomguard: {failure}"


def _compare(run, record):
    """The record against its baseline, or a failure line for a baseline file that cannot be read."""
    try:
        return _core.compare_with_baseline(run.baselines, record["scenario"], record, run.strict), None
    except ValueError as e:
        return None, f"oomguard: baseline: {e}"


def _code(message, failures):
    """The test's result as the CLI's reports name it (model/result_code.h)."""
    if message.get("timeout"):
        return "TIMEOUT"
    if message["outcome"] == "crashed":
        return "UNRESOLVED"
    return "FAIL" if failures or message["outcome"] == "failed" else "PASS"


def _reasons(text, outcome):
    """A failed test's reason in one line: pytest's first "E   ..." line, else the text's last line."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    explained = [line[1:].strip() for line in lines if line.startswith("E ")]
    return [(explained or lines or [outcome])[0 if explained else -1]]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    measure = pyfuncitem.stash.get(_MEASURE, None)
    function = pyfuncitem.obj
    if measure is None or inspect.iscoroutinefunction(function):
        return None  # pytest's own call (an async test is pytest's, or its plugins', to run)
    run = pyfuncitem.config.stash[_RUN]
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}

    def call():
        measure(function)(**args)

    snapshot = _snapshot_paths(run, pyfuncitem.nodeid, measure)
    measure.snapshot = snapshot[1] if snapshot else ""  # Note [Snapshots of failing tests]
    if pyfuncitem.stash[_ISOLATE]:
        message = _run_forked(pyfuncitem, measure, call)
        error = None
    else:
        started, error = time.monotonic(), None
        try:
            call()
            message = {"outcome": "passed", "text": ""}
        except BaseException as e:  # noqa: BLE001 - re-raised below, after the numbers are kept
            error = e
            message = {"outcome": "failed", "text": str(e)}
        if measure.result is not None:
            message["record"] = record_of(pyfuncitem.nodeid, measure.result, 1000 * (time.monotonic() - started))
    pyfuncitem.user_properties.extend(tuple(p) for p in message.get("user_properties", []))
    record = message.get("record")
    # Note [A measurement's warnings in pytest]: what r.warnings says (an allocation not modelled, a path meta
    # cannot take, a loop without m.iterations) reaches pytest's warnings summary under the test's own line,
    # from the child too, as OomguardWarning: `-W error::oomguard.OomguardWarning` makes each a failure.
    for text in (record or {}).get("warnings", []):
        warnings.warn_explicit(OomguardWarning(text), OomguardWarning, str(pyfuncitem.path),
                               pyfuncitem.location[1] + 1)
    failures, comparison = [], None
    if record is not None and pyfuncitem.config.getoption("oomguard_diagnose"):
        _measure_the_fix(pyfuncitem, measure, function, args, record)
    if record is not None:
        run.records.append(record)
        checks = pyfuncitem.stash.get(_CHECKS, None)
        if message["outcome"] == "passed":
            failures = failures_of(record, checks) if checks is not None else []
            comparison, broken = _compare(run, record)
            failures += [broken] if broken else [] if run.update else [_flags(f) for f in comparison["failures"]]
            if comparison is not None and not comparison["failures"]:
                run.compared.append((pyfuncitem.nodeid, comparison))
        pyfuncitem.user_properties.extend(junit_properties(record, comparison))
    outcome = message["outcome"]
    if snapshot:
        kept = _keep_snapshot(run, snapshot, outcome in ("passed", "skipped") and not failures)
        if kept and record is not None:
            record["snapshot"] = kept
            pyfuncitem.user_properties.append(("oomguard_snapshot", kept))
    run.tests.append({"nodeid": pyfuncitem.nodeid, "record": record, "code": _code(message, failures),
                      "reasons": failures if outcome == "passed" else _reasons(message["text"], outcome)})
    if error is not None:
        raise error
    if outcome == "skipped":  # reported at the test, as pytest reports a skip in its body
        raise pytest.skip.Exception(message["text"], _use_item_location=True)
    if outcome == "xfailed":
        pytest.xfail(message["text"])
    if outcome == "crashed":
        pytest.fail(message["text"], pytrace=False)
    if outcome == "failed":  # the child's traceback, under its one-line reason (pytest's short summary shows it)
        pytest.fail(f"in the test's forked child: {_reasons(message['text'], outcome)[0]}\n\n{message['text']}",
                    pytrace=False)
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)
    return True


# ---- measured fixes ---------------------------------------------------------------------------

# Note [The measured fix in pytest]: as `oomguard run --diagnose` reruns a variant with a diagnosis'
# fix applied, --oomguard-diagnose reruns a test whose evaluation keeps its graph (eval-keeps-graph)
# with every m.phase("eval") under torch.no_grad() (oomguard.measure(eval_no_grad=True)), in a child of
# its own when the test has one, and puts what it gave beside the diagnosis: the fix's peak and live
# growth, which the failure's text shows. The other pitfalls' fixes are changes to the code itself.
FIXES = {"eval-keeps-graph": "every eval phase under torch.no_grad()"}


def _measure_the_fix(item, measure, function, args, record):
    kinds = [d for d in record["diagnoses"] if d["kind"] in FIXES]
    if not kinds:
        return
    fixed = copy.copy(measure)
    fixed.eval_no_grad, fixed.snapshot, fixed.inject, fixed.result = True, "", [], None
    fixed_args = {name: fixed if value is measure else value for name, value in args.items()}

    def call():
        fixed(function)(**fixed_args)

    if item.stash[_ISOLATE]:
        fixed_record = _run_forked(item, fixed, call).get("record")
    else:
        with contextlib.suppress(Exception):  # its outcome is in its result
            call()
        fixed_record = record_of(item.nodeid, fixed.result) if fixed.result is not None else None
    for d in kinds:
        d["measured"] = None if fixed_record is None else {
            "fix": FIXES[d["kind"]], "outcome": fixed_record["outcome"], "peak_bytes": fixed_record["peak_bytes"],
            "live_growth_per_iteration_bytes": fixed_record["live_growth_per_iteration_bytes"]}


# ---- snapshots --------------------------------------------------------------------------------

# Note [Snapshots of failing tests]: whether a test fails is known only in pytest's process, after its
# numbers are checked against the marker and the baseline, so every measured test's measurement writes
# its snapshot (in the child, before the child reports and exits) to a hidden name beside its final
# one; the parent then moves it into place (os.replace, atomic) when the test failed (an xfail too, as
# the CLI keeps an XFAIL's; not a skip), or with --oomguard-snapshot-all, and removes it otherwise: as `oomguard run --snapshot-dir` keeps its
# children's (run/snapshot_keeper.h). A child that died before its measurement ended left none.

def _snapshot_paths(run, nodeid, measure):
    """(final, written) paths of the test's snapshot, or None without --oomguard-snapshot-dir."""
    if not run.snapshot_dir:
        return None
    scenario, variant = names_of_test(nodeid)
    final = _core.snapshot_path(run.snapshot_dir, scenario, variant, measure.backend)
    head, tail = os.path.split(final)
    return final, os.path.join(head, f".{tail}.{os.getpid()}.partial")


def _keep_snapshot(run, paths, passed):
    """The kept snapshot's path, or None (a passing test's, or none written)."""
    final, written = paths
    if not os.path.exists(written):
        return None
    if passed and not run.snapshot_all:
        os.remove(written)
        return None
    try:
        os.replace(written, final)
    except OSError as e:
        run.end_lines.append(f"snapshot {final} not written: {e}")
        with contextlib.suppress(OSError):
            os.remove(written)
        return None
    run.end_lines.append(f"snapshot: {final}")
    return final


# ---- the end of the run -------------------------------------------------------------------------

def _scenarios(run):
    """The measured tests as the CLI's scenarios (one per module, backend and limit) for the C++ writers."""
    groups = {}
    for test in run.tests:
        r = test["record"]
        scenario, variant = names_of_test(test["nodeid"])
        key = (scenario, r["backend"], r["card"], r["cap_bytes"]) if r else (scenario, "", "", -1)
        group = groups.setdefault(key, {"name": scenario, "file": test["nodeid"].partition("::")[0],
                                        "backend": key[1], "card": key[2], "cap_bytes": key[3],
                                        "duration_ms": 0.0, "variants": []})
        group["variants"].append({"record": r, "name": variant, "code": test["code"], "reasons": test["reasons"]})
        group["duration_ms"] += r["duration_ms"] if r else 0.0
    return list(groups.values())


# Note [Under pytest-xdist]: with `pytest -n N` the tests run in worker processes and pytest's own
# process (the controller) runs none. Each worker hands what it measured to the controller at its end
# (config.workeroutput, as JSON) and writes nothing; the controller gathers them (pytest_testnodedown)
# and writes --oomguard-json, the reports and the baselines' update once, and prints the summary, as a
# run without xdist does.

def _is_xdist_worker(config):
    return hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    run = node.config.stash.get(_RUN, None)
    data = getattr(node, "workeroutput", {}).get("oomguard")
    if run is None or not data:
        return
    worker = json.loads(data)
    run.records += worker["records"]
    run.tests += worker["tests"]
    run.compared += [tuple(c) for c in worker["compared"]]
    run.end_lines += worker["end_lines"]


def pytest_sessionfinish(session):
    config = session.config
    run = config.stash.get(_RUN, None)
    if run is None:
        return
    if _is_xdist_worker(config):  # Note [Under pytest-xdist]
        config.workeroutput["oomguard"] = json.dumps({"records": run.records, "tests": run.tests,
                                                      "compared": run.compared, "end_lines": run.end_lines})
        return
    path = config.getoption("oomguard_json")
    if path:
        with open(path, "w") as out:
            json.dump({"tests": run.records}, out, indent=2)
            out.write("\n")
    if not run.tests:
        return
    scenarios = _scenarios(run)
    backends = sorted({s["backend"] for s in scenarios if s["backend"]})
    meta = {"backend": ", ".join(backends), "duration_ms": 1000 * (time.monotonic() - run.started),
            "strict": run.strict, "updating_baselines": run.update, "baselines_dir": run.baselines}
    for spec in run.reports:
        try:
            _core.write_report(spec, scenarios, meta)
            run.end_lines.append(f"report: {spec}")
        except (ValueError, RuntimeError) as e:
            run.end_lines.append(f"report {spec} not written: {e}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if run.update:
        text, error = _core.update_baselines(scenarios, meta)
        run.end_lines += [f"{line.strip()} ({run.baselines})" if line.startswith("baselines:") else line
                          for line in text.splitlines()]
        if error:
            run.end_lines.append(error.replace("--update-baselines", "--oomguard-update-baselines"))
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config):
    run = config.stash.get(_RUN, None)
    if run is None:
        return
    if run.records and config.getoption("oomguard"):
        terminalreporter.write_sep("=", "oomguard report")
        for line in summary_lines(run.records):
            terminalreporter.write_line(line)
    notes = baseline_lines(run.compared, run.baselines, run.strict, run.update) + run.end_lines
    if notes:
        terminalreporter.write_sep("=", "oomguard baselines and reports")
        for line in notes:
            terminalreporter.write_line(line)
