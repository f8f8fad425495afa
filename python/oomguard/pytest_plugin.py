"""oomguard's pytest plugin (entry point pytest11 "oomguard"), in the style of pytest-memray:

    @pytest.mark.oomguard(card="t4", backend="cpu", peak_at_most="2 GiB", no_leak=True)
    def test_training(oomguard_measure):          # the running oomguard.measure, for m.phase(...)
        m = oomguard_measure
        ...

A marked test runs inside oomguard.measure(card=, backend=, cap=) and fails, with the numbers, when its
peak is over peak_at_most, when its live bytes grow from iteration to iteration (no_leak, with
m.iterations(n)), or when oomguard diagnoses a pitfall (no_pitfalls). `--oomguard` measures every test
(no cap, cpu) and prints a table of peaks at the end; `--oomguard-json PATH` writes the numbers.
A bad marker (an unknown argument, card or size) stops the run at collection with a usage error.
Under --oomguard an unmarked test that opens its own oomguard.measure meets "a measurement is already
running": mark it instead.
"""
import json

import pytest

from oomguard.measure import Measure
from oomguard.report import failures_of, record_of, summary_lines

MARKER_ARGUMENTS = {"card": None, "backend": "cpu", "cap": None, "peak_at_most": None, "no_leak": True,
                    "no_pitfalls": False}
_MEASURE = pytest.StashKey()
_CHECKS = pytest.StashKey()
_RECORDS = pytest.StashKey()


def pytest_addoption(parser):
    group = parser.getgroup("oomguard", "GPU memory of the test's PyTorch code, measured by oomguard")
    group.addoption("--oomguard", action="store_true", default=False,
                    help="measure every test (unmarked ones on cpu, no cap) and print a table of peaks")
    group.addoption("--oomguard-json", metavar="PATH", default=None,
                    help="write each measured test's numbers to PATH as JSON")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "oomguard(card=None, backend='cpu', cap=None, peak_at_most=None, no_leak=True, no_pitfalls=False): "
        "run the test inside oomguard.measure and fail it past the limits")
    config.stash[_RECORDS] = []


def _checks_of(marker, nodeid):
    """The marker's arguments, checked: (Measure, checks), or pytest.UsageError naming what is accepted."""
    where = f"{nodeid}: @pytest.mark.oomguard"
    if marker.args:
        raise pytest.UsageError(f"{where}: takes keyword arguments only ({', '.join(MARKER_ARGUMENTS)})")
    unknown = sorted(set(marker.kwargs) - set(MARKER_ARGUMENTS))
    if unknown:
        raise pytest.UsageError(f"{where}: unknown argument {unknown[0]!r}; accepted: {', '.join(MARKER_ARGUMENTS)}")
    args = {**MARKER_ARGUMENTS, **marker.kwargs}
    try:
        measure = Measure(card=args["card"], backend=args["backend"], cap=args["cap"])
        limit = None
        if args["peak_at_most"] is not None:
            from oomguard import _core

            try:
                limit = _core.parse_bytes(str(args["peak_at_most"]))
            except ValueError as e:
                raise ValueError(f"peak_at_most: {str(e).split(': ', 1)[1]}") from None
    except (ValueError, TypeError) as e:
        raise pytest.UsageError(f"{where}: {str(e).removeprefix('oomguard.measure: ')}") from None
    checks = {"peak_at_most": limit, "peak_at_most_text": args["peak_at_most"], "no_leak": bool(args["no_leak"]),
              "no_pitfalls": bool(args["no_pitfalls"])}
    return measure, checks


def pytest_collection_modifyitems(config, items):
    measure_all = config.getoption("oomguard")
    for item in items:
        marker = item.get_closest_marker("oomguard")
        if marker is not None:
            item.stash[_MEASURE], item.stash[_CHECKS] = _checks_of(marker, item.nodeid)
        elif measure_all:
            item.stash[_MEASURE] = Measure()


@pytest.fixture
def oomguard_measure(request):
    """The oomguard.measure a marked test runs in (for m.phase, m.iterations, m.track, m.device)."""
    measure = request.node.stash.get(_MEASURE, None)
    if measure is None:
        pytest.fail(f"{request.node.nodeid}: the oomguard_measure fixture needs @pytest.mark.oomguard(...) "
                    "(or --oomguard)", pytrace=False)
    return measure


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    measure = pyfuncitem.stash.get(_MEASURE, None)
    if measure is None:
        return (yield)
    function = pyfuncitem.obj
    pyfuncitem.obj = measure(function)
    try:
        outcome = yield
    finally:
        pyfuncitem.obj = function
        if measure.result is not None:
            record = record_of(pyfuncitem.nodeid, measure.result)
            pyfuncitem.config.stash[_RECORDS].append(record)
            pyfuncitem.user_properties.append(("oomguard_peak_bytes", measure.result.peak_bytes))
    checks = pyfuncitem.stash.get(_CHECKS, None)
    if checks is not None:
        failures = failures_of(measure.result, checks)
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
    return outcome


def pytest_terminal_summary(terminalreporter, config):
    records = config.stash.get(_RECORDS, [])
    if not records or not config.getoption("oomguard"):
        return
    terminalreporter.write_sep("=", "oomguard report")
    for line in summary_lines(records):
        terminalreporter.write_line(line)


def pytest_sessionfinish(session):
    path = session.config.getoption("oomguard_json")
    if path:
        with open(path, "w") as out:
            json.dump({"tests": session.config.stash.get(_RECORDS, [])}, out, indent=2)
            out.write("\n")
