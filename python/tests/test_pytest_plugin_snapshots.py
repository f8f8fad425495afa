"""Python.PytestPluginInjectAndSnapshots: the pytest plugin's inject= marker argument and its
--oomguard-snapshot-dir (oomguard/pytest_plugin.py), run by pytest's pytester on small test files.

A marked test with inject="nth=1" fails with the injected torch.OutOfMemoryError, one that catches it
passes, one whose fault never fires fails saying so, and a bad spec is a usage error with the C++
parser's text. --oomguard-snapshot-dir writes the memory_viz snapshot of each failing measured test,
written in its forked child, under the CLI's names (<module>.<test>.<backend>.pickle), and of every
one with --oomguard-snapshot-all, leaving nothing else in the folder; the HTML report links them and the
JUnit XML names them (oomguard_snapshot). Under pytest-xdist (-n 2) the workers' tests reach the
controller's table, --oomguard-json, snapshot lines and the baselines' update.
"""
import json
import pickle
import xml.etree.ElementTree as ET

import pytest

import oomguard.pytest_plugin  # noqa: F401 - imported once: pytester's inner runs keep it (and torch) loaded

PLUGIN = ("-p", "oomguard.pytest_plugin", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning")

TESTS = '''
import pytest
import torch

@pytest.mark.oomguard(cap="1GiB", inject="nth=1")
def test_injected(oomguard_measure):
    with oomguard_measure.phase("forward"):
        torch.nn.Linear(64, 32)  # its weight, 8192 bytes, is the 1st request

@pytest.mark.oomguard(cap="1GiB", inject="phase=forward,nth=1")
def test_handles_it(oomguard_measure):
    torch.empty(100, dtype=torch.uint8)
    with oomguard_measure.phase("forward"):
        with pytest.raises(torch.OutOfMemoryError, match="injected by oomguard"):
            torch.empty(4096, dtype=torch.uint8)

@pytest.mark.oomguard(cap="1GiB", inject="nth=99")
def test_never_fires(oomguard_measure):
    torch.empty(100, dtype=torch.uint8)

@pytest.mark.oomguard(cap="1GiB", peak_at_most="1 KiB")
def test_over(oomguard_measure):
    with oomguard_measure.phase("forward"):
        x = torch.empty(4096, dtype=torch.uint8)

@pytest.mark.oomguard(cap="1GiB")
def test_under(oomguard_measure):
    torch.empty(100, dtype=torch.uint8)
'''


def test_inject(pytester):
    pytester.makepyfile(test_faults=TESTS)
    out = pytester.path / "oomguard.json"
    result = pytester.runpytest(*PLUGIN, "-k", "injected or handles or never", f"--oomguard-json={out}",
                                "--oomguard-report=json=results.json")
    result.assert_outcomes(passed=1, failed=2)
    records = {t["variant"]: t for t in json.loads(out.read_text())["tests"]}
    assert records["test_injected"]["oom"] == {
        "phase": "forward", "requested_bytes": 8192, "live_bytes": 0, "injected": True,
        "live_by_category": {"parameters": 0, "gradients": 0, "optimizer_state": 0, "inputs": 0,
                             "activations_and_transient": 0}}
    assert records["test_injected"]["injection"] == {
        "spec": "nth=1", "requests_seen": 1,
        "failures": [{"allocation_index": 1, "bytes": 8192, "phase": "forward", "policy": "nth=1"}]}
    assert records["test_handles_it"]["oom"] is None  # handled: the test passed
    assert records["test_handles_it"]["injection"] == {
        "spec": "phase=forward,nth=1", "requests_seen": 2,
        "failures": [{"allocation_index": 2, "bytes": 4096, "phase": "forward", "policy": "phase=forward,nth=1"}]}
    assert records["test_never_fires"]["injection"] == {"spec": "nth=99", "requests_seen": 1, "failures": []}
    report = json.loads((pytester.path / "results.json").read_text())  # the CLI's results JSON has them too
    variants = {v["name"]: v for s in report["scenarios"] for v in s["variants"]}
    assert variants["test_injected"]["measurement"]["injection"] == {"spec": "nth=1", "requests_seen": 1}
    assert variants["test_injected"]["measurement"]["injected_failures"] == records["test_injected"]["injection"]["failures"]
    result.stdout.fnmatch_lines([
        "*_ test_injected _*",
        "in the test's forked child: torch.OutOfMemoryError: CPU out of memory (injected by oomguard: nth=1, "
        "allocation #1 in phase forward). Tried to allocate 8.00 KiB. *",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_never_fires _*",
        "oomguard: inject='nth=99' never fired: it saw 1 allocation requests and failed none (a fault that never "
        "fires tests nothing)",
    ])


def test_bad_inject_is_a_usage_error(pytester):
    pytester.makepyfile(test_bad='import pytest\n@pytest.mark.oomguard(inject="nth=x")\ndef test_it():\n    pass\n')
    result = pytester.runpytest(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: test_bad.py::test_it: @pytest.mark.oomguard: inject: invalid fault spec "
                                 "'nth=x': nth must be a whole number >= 1, got 'x'"])


def events(path):
    with open(path, "rb") as f:
        s = pickle.load(f)
    assert sorted(s) == ["device_traces", "oomguard", "segments"]
    return [(e["action"], e["size"]) for e in s["device_traces"][0]]


def allocated_and_freed(size):
    """The events of one tensor made and freed, as the caching allocator would log them."""
    return [(a, size) for a in ("segment_alloc", "alloc", "free_requested", "free_completed", "segment_free")]


def test_snapshot_dir(pytester):
    pytester.makepyfile(test_faults=TESTS)
    snaps = pytester.path / "snaps" / "deeper"  # created
    result = pytester.runpytest(*PLUGIN, "--oomguard-snapshot-dir=snaps/deeper", "-k", "over or under or injected",
                                "--junitxml=junit.xml", "--oomguard-report=html=memory.html")
    result.assert_outcomes(passed=1, failed=2)
    over = snaps / "test_faults.test_over.cpu.pickle"
    assert f'memory_viz snapshot: <a href="{over}">' in (pytester.path / "memory.html").read_text()
    junit = ET.parse(pytester.path / "junit.xml").getroot()
    snapshots = {case.get("name"): [p.get("value") for p in case.iter("property") if p.get("name") == "oomguard_snapshot"]
                 for case in junit.iter("testcase")}
    assert snapshots == {"test_injected": [str(snaps / "test_faults.test_injected.cpu.pickle")],
                         "test_over": [str(over)], "test_under": []}
    assert sorted(p.name for p in snaps.iterdir()) == ["test_faults.test_injected.cpu.pickle",
                                                       "test_faults.test_over.cpu.pickle"]
    assert events(snaps / "test_faults.test_over.cpu.pickle") == allocated_and_freed(4096)
    assert events(snaps / "test_faults.test_injected.cpu.pickle") == [("oom", 8192)]
    result.stdout.fnmatch_lines(["*= oomguard baselines and reports =*"])
    result.stdout.fnmatch_lines([f"snapshot: {snaps}/test_faults.test_injected.cpu.pickle"])
    result.stdout.fnmatch_lines([f"snapshot: {snaps}/test_faults.test_over.cpu.pickle"])

    for p in snaps.iterdir():
        p.unlink()
    result = pytester.runpytest(*PLUGIN, "--oomguard-snapshot-dir=snaps/deeper", "--oomguard-snapshot-all",
                                "--oomguard-no-fork", "-k", "over or under")
    result.assert_outcomes(passed=1, failed=1)
    assert sorted(p.name for p in snaps.iterdir()) == ["test_faults.test_over.cpu.pickle",
                                                       "test_faults.test_under.cpu.pickle"]
    assert events(snaps / "test_faults.test_under.cpu.pickle") == allocated_and_freed(100)


def test_snapshot_options_misused(pytester):
    pytester.makepyfile(test_faults=TESTS)
    result = pytester.runpytest(*PLUGIN, "--oomguard-snapshot-all")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --oomguard-snapshot-all needs --oomguard-snapshot-dir DIR"])
    (pytester.path / "file").write_text("")
    result = pytester.runpytest(*PLUGIN, "--oomguard-snapshot-dir=file/snaps")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --oomguard-snapshot-dir: cannot create {pytester.path}/file/snaps: *"])


def test_under_xdist(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_faults=TESTS)
    out = pytester.path / "oomguard.json"
    result = pytester.runpytest_subprocess(*PLUGIN, "-n", "2", "--oomguard", f"--oomguard-json={out}",
                                           "--oomguard-snapshot-dir=snaps", "-k", "over or under or injected")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "*= oomguard report =*",
        "test * peak bytes * peak * phase * outcome * measured on",
        "test_faults.py::test_over * 4096 * 4.00 KiB * forward * pass * cpu",
        "test_faults.py::test_under * 100 * 100 bytes * setup * pass * cpu",
        "test_faults.py::test_injected * 0 * 0 bytes * setup * oom * cpu",
    ])
    result.stdout.fnmatch_lines(["*= oomguard baselines and reports =*"])
    result.stdout.fnmatch_lines([f"snapshot: {pytester.path}/snaps/test_faults.test_over.cpu.pickle"])
    tests = sorted(t["test"] for t in json.loads(out.read_text())["tests"])
    assert tests == ["test_faults.py::test_injected", "test_faults.py::test_over", "test_faults.py::test_under"]
    assert sorted(p.name for p in (pytester.path / "snaps").iterdir()) == ["test_faults.test_injected.cpu.pickle",
                                                                          "test_faults.test_over.cpu.pickle"]
    # The baselines' update: once, by pytest's process, with the tests of both workers.
    result = pytester.runpytest_subprocess(*PLUGIN, "-n", "2", "--oomguard-update-baselines", "-k", "under or handles")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["baselines: 1 file(s) written (*)"])
    stored = json.loads((pytester.path / "oomguard-baselines" / "test_faults.json").read_text())
    assert sorted(e["variant"] for e in stored["entries"]) == ["test_handles_it", "test_under"]
