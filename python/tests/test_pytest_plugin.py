"""Python.PytestPluginFailsPastTheLimits: the pytest plugin (oomguard/pytest_plugin.py), run by
pytest's own pytester on small test files: a test under its limit passes, one over it fails with the
peak and the limit in bytes, a growing list fails no_leak with its bytes per iteration, a kept eval
graph fails no_pitfalls with the detectors' text and the Python line that made it, and bad markers
stop the run with a usage error naming what is accepted. Then what issue #32 item 4 added: baselines
(a regression fails with the CLI's numbers, an improvement is noted, an update rewrites the file, a
missing baseline fails under --oomguard-strict), isolation in forked children (a module-level tensor
one test keeps does not reach the next one's numbers; a child that exits, crashes or hangs is
reported), JUnit properties, and the CLI's Markdown and HTML reports.
"""
import json
import xml.etree.ElementTree as ET

import pytest
import torch

import oomguard.pytest_plugin  # noqa: F401 - imported once: pytester's inner runs keep it (and torch) loaded

# The outer run imported the plugin already, so the inner ones cannot rewrite its asserts (it has none).
PLUGIN = ("-p", "oomguard.pytest_plugin", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning")

KNOWN_CARDS = ("t4, l4, a10, a10g, rtx3060, rtx3090, rtx4090, v100-16gb, v100-32gb, a100-40gb, a100-80gb, h100, "
               "h100-pcie, h200, l40s, rtx-a6000")
SIZES = "expected a size such as 16GiB, 15.5GB, 512MiB, 4096 or 1e9 (units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"

TESTS = '''
import pytest

import oomguard.pytest_plugin  # noqa: F401 - imported once: pytester's inner runs keep it (and torch) loaded
import torch

@pytest.mark.oomguard(card="t4", backend="cpu", peak_at_most="1 MiB")
def test_under(oomguard_measure):
    with oomguard_measure.phase("forward"):
        torch.empty(1000, dtype=torch.uint8)

@pytest.mark.oomguard(card="t4", peak_at_most="1 MiB")
def test_over(oomguard_measure):
    with oomguard_measure.phase("forward"):
        torch.empty(2 << 20, dtype=torch.uint8)

@pytest.mark.oomguard(cap="1GiB")
def test_leak(oomguard_measure):
    m, kept = oomguard_measure, []
    for _ in m.iterations(3):
        with m.phase("forward"):
            kept.append(torch.empty(4096, dtype=torch.uint8))

@pytest.mark.oomguard(cap="1GiB", no_leak=False, no_pitfalls=True)
def test_pitfall(oomguard_measure):
    m, kept = oomguard_measure, []
    w, x = torch.ones(256, 256, requires_grad=True), torch.ones(32, 256)
    for _ in m.iterations(3):
        with m.phase("eval"):  # the forgotten torch.no_grad(): each loss keeps x @ w (32,768 bytes)
            kept.append((x @ w).pow(2).mean())

@pytest.mark.oomguard(cap="1GiB", no_leak=False)
def test_leak_allowed(oomguard_measure):
    m, kept = oomguard_measure, []
    for _ in m.iterations(3):
        kept.append(torch.empty(4096, dtype=torch.uint8))

@pytest.mark.oomguard(cap="1GiB", leak_at_most="1 KiB")
def test_loss_history(oomguard_measure):  # a detached loss kept per iteration: 4 bytes each, tolerated
    m, losses = oomguard_measure, []
    for _ in m.iterations(3):
        losses.append(torch.ones(256).sum())

@pytest.mark.oomguard(cap="1GiB", leak_at_most="1 KiB")
def test_leak_past_the_tolerance(oomguard_measure):
    m, kept = oomguard_measure, []
    for _ in m.iterations(3):
        kept.append(torch.empty(4096, dtype=torch.uint8))
'''


def test_limits_and_leaks(pytester):
    pytester.makepyfile(test_models=TESTS)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=3, failed=4)
    result.stdout.fnmatch_lines([
        "*_ test_over _*",
        "oomguard: peak 2.00 MiB (2097152 bytes) in forward is over peak_at_most='1 MiB': 1024.00 KiB (1048576 bytes)",
    ])
    result.stdout.fnmatch_lines([
        "oomguard: leak: live bytes grow by 4096 bytes per iteration (live after each iteration: 4096, 8192, 12288)",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_leak_past_the_tolerance _*",
        "oomguard: leak: live bytes grow by 4096 bytes per iteration, over leak_at_most='1 KiB' (1024 bytes) "
        "(live after each iteration: 4096, 8192, 12288)",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_pitfall _*",
        "oomguard: pitfall eval-keeps-graph (32.00 KiB at the end of eval): the evaluation of iteration 1 keeps "
        "3 autograd nodes it made alive (newest MeanBackward0, made in test_models.py:* "
        "(kept.append((x @ w).pow(2).mean()))), holding 32.00 KiB it allocated*",
        "  fix: run evaluation under no_grad*",
        "oomguard: pitfall graph-kept-across-iterations (32.00 KiB per iteration): *",
    ])
    result.stdout.no_fnmatch_line("*oomguard report*")  # the table is --oomguard's


def test_a_measurement_s_warnings_are_pytest_warnings(pytester):
    """Note [A measurement's warnings in pytest]: test_under never calls m.iterations(n), which its measurement
    warns of; the warning is in pytest's summary under the test's line, in the forked child and without it, and
    -W error::oomguard.OomguardWarning makes it a failure."""
    pytester.makepyfile(test_models=TESTS)
    warning = ("*test_models.py:*: OomguardWarning: the measured code never calls m.iterations(n), so it is "
               "measured as one run*")
    for isolation in ((), ("--oomguard-no-fork",)):
        result = pytester.runpytest(*PLUGIN, *isolation, "-k", "test_under")
        result.assert_outcomes(passed=1, warnings=1)
        result.stdout.fnmatch_lines(["*test_models.py::test_under*", warning])
    result = pytester.runpytest(*PLUGIN, "-W", "error::oomguard.OomguardWarning", "-k", "test_under")
    result.assert_outcomes(failed=1)


def test_the_fix_of_a_kept_eval_graph_is_measured(pytester):
    # --oomguard-diagnose reruns test_pitfall with every eval phase under no_grad (Note [The measured fix in
    # pytest]). Setup: w and x, 294,912 bytes. Fixed: an eval's x @ w and its pow() (32,768 bytes each) and
    # the two losses kept before it (4 each) at the peak; as it is: also the two earlier evals' kept graphs.
    pytester.makepyfile(test_models=TESTS)
    out = pytester.path / "oomguard.json"
    result = pytester.runpytest(*PLUGIN, "--oomguard-diagnose", f"--oomguard-json={out}", "-k", "pitfall")
    result.assert_outcomes(failed=1)
    setup, product, kept_graph = 256 * 256 * 4 + 32 * 256 * 4, 32 * 256 * 4, 32 * 256 * 4 + 4
    fixed_peak, peak = setup + 2 * product + 2 * 4, setup + 2 * product + 2 * kept_graph + 4
    assert (fixed_peak, peak) == (360456, 425996)
    result.stdout.fnmatch_lines([
        "  fix: run evaluation under no_grad*",
        f"  measured: with every eval phase under torch.no_grad(): pass, peak 352.01 KiB ({fixed_peak} bytes) "
        f"(now 416.01 KiB ({peak} bytes)), live growth 4 bytes per iteration (now {kept_graph})",
    ])
    (test,) = json.loads(out.read_text())["tests"]
    assert test["diagnoses"][0]["measured"] == {"fix": "every eval phase under torch.no_grad()", "outcome": "pass",
                                                "peak_bytes": fixed_peak, "live_growth_per_iteration_bytes": 4.0}


def test_report_table_and_json(pytester):
    pytester.makepyfile(test_models=TESTS)
    out = pytester.path / "oomguard.json"
    result = pytester.runpytest(*PLUGIN, "--oomguard", f"--oomguard-json={out}", "-k", "under or over")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*= oomguard report =*",
        "test * peak bytes * peak * phase * outcome * measured on",
        "test_models.py::test_over * 2097152 * 2.00 MiB * forward * pass * cpu",
        "test_models.py::test_under * 1000 * 1000 bytes * forward * pass * cpu",
    ])
    tests = {t["test"]: t for t in json.loads(out.read_text())["tests"]}
    assert sorted(tests) == ["test_models.py::test_over", "test_models.py::test_under"]
    assert tests["test_models.py::test_over"]["peak_bytes"] == 2097152
    assert tests["test_models.py::test_under"]["phase_peak_bytes"] == {"forward": 1000, "setup": 0}
    assert tests["test_models.py::test_under"]["card"] == "NVIDIA T4 16GB"
    assert tests["test_models.py::test_over"]["cuda_model"]["reserved_peak_bytes"] == 20 << 20  # a large segment
    assert tests["test_models.py::test_over"]["cuda_model"]["decides"] is True


CARD_AND_RANK = '''
import pytest
import torch

@pytest.mark.oomguard(card="t4", backend="meta", kernels="cuda", world=4, rank=3)
def test_a_card_s_rank(oomguard_measure):
    x = torch.empty(1000, dtype=torch.bfloat16, device="meta", requires_grad=True)
    with oomguard_measure.phase("forward"):
        torch.nn.functional.dropout(x, 0.1, training=True)
'''


def test_card_mode_and_a_rank_in_the_marker(pytester, tmp_path):
    pytester.makepyfile(test_card=CARD_AND_RANK)
    out, baselines = pytester.path / "oomguard.json", tmp_path / "baselines"
    result = pytester.runpytest(*PLUGIN, "--oomguard", f"--oomguard-json={out}", f"--oomguard-baselines={baselines}",
                                "--oomguard-update-baselines")
    result.assert_outcomes(passed=1)
    # the table says whose numbers they are (report.py's measured_on)
    result.stdout.fnmatch_lines(["test_card.py::test_a_card_s_rank * pass * meta, cuda sm_75 kernels, rank 3 of 4"])
    (test,) = json.loads(out.read_text())["tests"]
    # a card's dropout: the bf16 output and a 1-byte mask
    assert (test["kernels"], test["phase_peak_bytes"]["forward"]) == ("cuda sm_75", 2000 + 2000 + 1000)
    assert (test["world"], test["rank"], test["process_group"]) == (4, 3, "fake")
    (entry,) = json.loads((baselines / "test_card.json").read_text())["entries"]
    assert entry["kernels"] == "cuda sm_75"  # keyed apart from cpu's kernels
    assert entry["parallel"] == "rank 3 of 4"  # and from other ranks and worlds


VERDICTS = '''
import pytest
import torch

def keeps_five():  # 700 KiB each: 3584000 bytes, in 2 MiB segments of two (6 MiB) or 2 MiB pages (4 MiB)
    return [torch.empty(700 * 1024, dtype=torch.uint8) for _ in range(5)]

@pytest.mark.oomguard(cap="5MiB")
def test_reserved(oomguard_measure):
    keeps_five()

@pytest.mark.oomguard(cap="5MiB", verdict="allocated")
def test_allocated(oomguard_measure):
    keeps_five()

@pytest.mark.oomguard(cap="5MiB", alloc_conf="expandable_segments:True")
def test_expandable(oomguard_measure):
    keeps_five()
'''


def test_the_marker_passes_verdict_and_alloc_conf(pytester, monkeypatch):
    for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
        monkeypatch.delenv(name, raising=False)  # the model's defaults
    pytester.makepyfile(test_verdicts=VERDICTS)
    out = pytester.path / "oomguard.json"
    result = pytester.runpytest(*PLUGIN, f"--oomguard-json={out}")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*_ test_reserved _*",
                                 "*CPU out of memory (oomguard cap on reserved bytes, as on the GPU)*"])
    tests = {t["test"].split("::")[1]: t for t in json.loads(out.read_text())["tests"]}
    assert tests["test_reserved"]["outcome"] == "oom"
    assert tests["test_allocated"]["cuda_model"] is None and tests["test_allocated"]["peak_bytes"] == 3584000
    assert tests["test_expandable"]["cuda_model"]["reserved_peak_bytes"] == 4 << 20


def test_unmarked_tests_measured_with_the_option_only(pytester):
    pytester.makepyfile(test_plain="import torch\ndef test_plain():\n    torch.empty(5000, dtype=torch.uint8)\n")
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*oomguard report*")
    result = pytester.runpytest(*PLUGIN, "--oomguard")
    result.stdout.fnmatch_lines(["test_plain.py::test_plain * 5000 * setup * pass * cpu"])


@pytest.mark.parametrize(
    "marker, message",
    [
        ('card="t5"', f"unknown card 't5'; known cards: {KNOWN_CARDS} (see `oomguard cards`)"),
        ('peak_at_most="2 parsecs"', f"peak_at_most: invalid size '2 parsecs': unknown unit 'parsecs'; {SIZES}"),
        ('cap="lots"', f"invalid size 'lots': {SIZES}"),
        ('backend="gpu"', "backend='gpu' is not one of cpu, meta, cuda"),
        ('verdict="bytes"', "verdict='bytes' is not one of reserved, allocated"),
        ('peak="2GiB"', "unknown argument 'peak'; accepted: card, backend, cap, kernels, verdict, alloc_conf, "
                         "peak_at_most, no_leak, leak_at_most, no_pitfalls, isolate, inject, world, rank"),
        ('leak_at_most="1 KiB", no_leak=False', "leak_at_most='1 KiB' with no_leak=False: give one of them "
                                                "(leak_at_most checks the leak, with that much growth allowed)"),
        ('leak_at_most="some"', f"leak_at_most: invalid size 'some': {SIZES}"),
    ],
)
def test_bad_marker_is_a_usage_error(pytester, marker, message):
    pytester.makepyfile(test_bad=f"import pytest\n@pytest.mark.oomguard({marker})\ndef test_it():\n    pass\n")
    result = pytester.runpytest(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: test_bad.py::test_it: @pytest.mark.oomguard: {message}"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the test would run")
def test_a_cuda_test_is_skipped_without_a_gpu(pytester):
    # A GPU test on a CPU runner is skipped with the reason, as torch's own GPU tests are: not an error.
    pytester.makepyfile(test_gpu="import pytest\n@pytest.mark.oomguard(card=\"t4\", backend=\"cuda\")\n"
                                 "def test_on_the_card(oomguard_measure):\n    pass\n")
    result = pytester.runpytest(*PLUGIN, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(['*oomguard: backend="cuda" needs a GPU, and torch sees none*'])


def step(kib):
    """A test file whose one test allocates `kib` KiB in forward: the code a baseline is recorded for."""
    return ("import pytest\nimport torch\n\n@pytest.mark.oomguard(card=\"t4\")\ndef test_step(oomguard_measure):\n"
            f"    with oomguard_measure.phase(\"forward\"):\n        torch.empty({kib} * 1024, dtype=torch.uint8)\n")


def test_baselines_regression_improvement_update_and_strict(pytester):
    baselines = pytester.path / "oomguard-baselines"
    stored = baselines / "test_train.json"
    pytester.makepyfile(test_train=step(1024))
    result = pytester.runpytest(*PLUGIN, "--oomguard-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"oomguard: no baseline in {stored} (--oomguard-strict); "
                                 "record one with --oomguard-update-baselines"])
    result = pytester.runpytest(*PLUGIN)  # not strict: a note
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"no baseline in {baselines} for 1 test(s): test_train.py::test_step",
                                 "record the numbers with --oomguard-update-baselines; "
                                 "--oomguard-strict fails a test without a baseline"])

    result = pytester.runpytest(*PLUGIN, "--oomguard-update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["  new        test_train/test_step: peak 1024.00 KiB",
                                 f"baselines: 1 file(s) written ({baselines})"])
    file = json.loads(stored.read_text())  # the CLI's format (scenarios/FORMAT.md), one file per module
    assert file["scenario"] == "test_train"
    assert file["tolerance"] == {"absolute_bytes": 0, "relative": 0.0}
    assert file["entries"] == [{"alloc_count": 1, "backend": "cpu", "cap_bytes": 15381561344, "card": "NVIDIA T4 16GB",
                                "live_after": [], "peak_bytes": 1048576,
                                "phase_peaks": {"forward": 1048576, "setup": 0}, "variant": "test_step"}]
    result = pytester.runpytest(*PLUGIN, "--oomguard-strict")  # unchanged: nothing to say
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*oomguard baselines*")

    pytester.makepyfile(test_train=step(1280))  # the code made worse
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_step _*",
        "oomguard: regression: peak_bytes 1.25 MiB vs baseline 1024.00 KiB (+256.00 KiB, +25.0%)",
        "oomguard: regression: phase_peak.forward 1.25 MiB vs baseline 1024.00 KiB (+256.00 KiB, +25.0%)",
    ])
    pytester.makepyfile(test_train=step(768))  # better: passes, with a note
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "improved: test_train.py::test_step: peak_bytes 768.00 KiB vs baseline 1024.00 KiB (-256.00 KiB, -25.0%); "
        "phase_peak.forward 768.00 KiB vs baseline 1024.00 KiB (-256.00 KiB, -25.0%)",
        "record the numbers with --oomguard-update-baselines",
    ])

    pytester.makepyfile(test_train=step(1280))  # the change intended: the update records it, and passes
    result = pytester.runpytest(*PLUGIN, "--oomguard-update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["  changed    test_train/test_step: peak 1024.00 KiB -> 1.25 MiB (+256.00 KiB)"])
    assert json.loads(stored.read_text())["entries"][0]["peak_bytes"] == 1310720
    assert sorted(p.name for p in baselines.iterdir()) == [".update.lock", "test_train.json"]  # no temporaries
    pytester.runpytest(*PLUGIN, "--oomguard-strict").assert_outcomes(passed=1)

    file = json.loads(stored.read_text())  # a file's tolerance is the CLI's: 25% more passes under 30%
    file["tolerance"]["relative"] = 0.3
    stored.write_text(json.dumps(file))
    pytester.makepyfile(test_train=step(1600))
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)
    elsewhere = pytester.path / "memory" / "test_train.json"  # --oomguard-baselines DIR, from where pytest runs
    result = pytester.runpytest(*PLUGIN, "--oomguard-baselines=memory", "--oomguard-update-baselines")
    result.stdout.fnmatch_lines(["  new        test_train/test_step: peak 1.56 MiB"])
    assert json.loads(elsewhere.read_text())["entries"][0]["peak_bytes"] == 1600 * 1024
    stored.write_text("{")  # a broken file fails the test, naming it
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"oomguard: baseline: {stored}:*"])


ISOLATION = """
import pytest
import torch

KEPT = []

@pytest.mark.oomguard(cap="1GiB"{isolate})
def test_a_keeps(oomguard_measure):
    KEPT.append(torch.empty(1 << 20, dtype=torch.uint8))  # a module-level tensor, alive after the test

@pytest.mark.oomguard(cap="1GiB")
def test_b_after(oomguard_measure):
    assert len(KEPT) == {kept}
    torch.empty(1000, dtype=torch.uint8)

def test_c_clears():  # not measured: in pytest's process, the next pytester run starts without the megabyte
    KEPT.clear()
"""


def test_isolation_keeps_each_tests_memory_to_itself(pytester):
    out = pytester.path / "numbers.json"

    def peaks(*options, isolate="", kept):
        pytester.makepyfile(test_iso=ISOLATION.format(isolate=isolate, kept=kept))
        pytester.runpytest(*PLUGIN, f"--oomguard-json={out}", *options).assert_outcomes(passed=3)
        return [t["peak_bytes"] for t in json.loads(out.read_text())["tests"]]

    assert peaks(kept=0) == [1048576, 1000]  # forked: the kept megabyte stayed in test_a's child
    # In pytest's process the kept megabyte is live when the next test starts, and counts in its peak.
    assert peaks("--oomguard-no-fork", kept=1) == [1048576, 1049576]
    assert peaks(isolate=", isolate=False", kept=1) == [1048576, 1049576]


CHILDREN = """
import ctypes
import os
import time

import pytest
import torch

@pytest.mark.oomguard(cap="1GiB")
def test_exits(oomguard_measure):
    os._exit(3)

@pytest.mark.oomguard(cap="1GiB")
def test_crashes(oomguard_measure):
    ctypes.string_at(0)

@pytest.mark.oomguard(cap="1GiB")
def test_hangs(oomguard_measure):
    time.sleep(600)

@pytest.mark.oomguard(cap="1GiB")
def test_asserts(oomguard_measure):
    x = torch.empty(1000, dtype=torch.uint8)
    assert x.numel() == 3

@pytest.mark.oomguard(cap="1KiB")
def test_oom(oomguard_measure):
    torch.empty(1 << 20, dtype=torch.uint8)

@pytest.mark.oomguard(cap="1GiB")
def test_skips(oomguard_measure):
    pytest.skip("not today")

@pytest.mark.oomguard(cap="1GiB")
def test_xfails(oomguard_measure):
    pytest.xfail("known")

@pytest.mark.oomguard(cap="1GiB")
def test_passes(oomguard_measure, record_property):
    record_property("rows", 7)  # recorded in the child, reported by the parent
    torch.empty(1000, dtype=torch.uint8)
"""


def test_children_that_fail_die_or_hang_are_reported(pytester):
    pytester.makepyfile(test_children=CHILDREN)
    junit = pytester.path / "junit.xml"
    # 10 s: the other children must finish inside it on a machine busy with other work.
    result = pytester.runpytest(*PLUGIN, "-rs", "-p", "no:faulthandler", "--oomguard-timeout=10", f"--junitxml={junit}",
                                "-o", "junit_family=xunit1")
    result.assert_outcomes(passed=1, failed=5, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines([
        "*_ test_exits _*",
        "oomguard: the test's forked child exited with code 3 before it reported (os._exit in the test?); no numbers",
        "*_ test_crashes _*",
        "oomguard: the test's forked child died of signal 11 (SIGSEGV) before it reported; no numbers",
        "*_ test_hangs _*",
        "oomguard: the test's forked child ran past --oomguard-timeout=10 s and was killed (SIGKILL); no numbers",
        "*_ test_asserts _*",
        "in the test's forked child: assert 1000 == 3",
        ">       assert x.numel() == 3",
        "test_children.py:23: AssertionError",
        "*_ test_oom _*",
        "in the test's forked child: torch.OutOfMemoryError: CPU out of memory (oomguard cap). Tried to allocate "
        "1024.00 KiB. *",
    ])
    result.stdout.fnmatch_lines(["SKIPPED [1] test_children.py:29: not today"])
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_passes"].iter("property")}
    assert props["rows"] == "7" and props["oomguard_peak_bytes"] == "1000"


def test_junit_properties_and_the_clis_reports(pytester):
    pytester.makepyfile(test_models=TESTS)
    junit, md, html = (pytester.path / name for name in ("junit.xml", "memory.md", "memory.html"))
    result = pytester.runpytest(*PLUGIN, "-k", "under or over or pitfall", f"--junitxml={junit}",
                                f"--oomguard-report=md={md}", f"--oomguard-report=html={html}")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([f"report: md={md}", f"report: html={html}"])
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    under = [(p.get("name"), p.get("value")) for p in cases["test_under"].iter("property")]
    assert under == [("oomguard_peak_bytes", "1000"), ("oomguard_peak_phase", "forward"),
                     ("oomguard_phase_peak_bytes.forward", "1000"), ("oomguard_phase_peak_bytes.setup", "0"),
                     ("oomguard_live_after_iteration", ""), ("oomguard_live_growth_per_iteration_bytes", ""),
                     ("oomguard_leak", "false"), ("oomguard_alloc_count", "1"), ("oomguard_diagnoses", "activations-dominate"),
                     ("oomguard_baseline", "new")]
    pitfall = {p.get("name"): p.get("value") for p in cases["test_pitfall"].iter("property")}
    # w and x (262,144 + 32,768 bytes), and each iteration's kept x @ w and loss (32,768 + 4 bytes) more
    assert pitfall["oomguard_live_after_iteration"] == "327684,360456,393228"
    assert pitfall["oomguard_diagnoses"] == "eval-keeps-graph,graph-kept-across-iterations"

    text = md.read_text()
    assert text.startswith("**oomguard: FAIL** — 2 of 2 scenarios failing, no memory regressions\n"), text
    # reserved: the model's segments, 20 MiB for a 2 MiB tensor, 2 MiB for 1000 bytes (the small pool).
    for row in ["| test\\_models | test\\_over | cpu | NVIDIA T4 16GB | **FAIL** (no baseline) | 2.00 MiB | 20.00 MiB "
                "| — | — | — | forward |",
                "| test\\_models | test\\_under | cpu | NVIDIA T4 16GB | PASS (no baseline) | 1000 bytes | 2.00 MiB "
                "| — | — | — | forward |",
                "  - oomguard: peak 2.00 MiB (2097152 bytes) in forward is over peak\\_at\\_most='1 MiB': 1024.00 KiB "
                "(1048576 bytes)"]:
        assert row in text.splitlines(), (row, text)
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "test_over" in page and "2.00 MiB" in page

    result = pytester.runpytest(*PLUGIN, "--oomguard-report=pdf=x.pdf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --oomguard-report: expected FORMAT=FILE with FORMAT one of "
                                 "junit, md, html, json, csv, got 'pdf=x.pdf'"])
