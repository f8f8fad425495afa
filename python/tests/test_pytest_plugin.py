"""Python.PytestPluginFailsPastTheLimits: the pytest plugin (oomguard/pytest_plugin.py), run by
pytest's own pytester on small test files: a test under its limit passes, one over it fails with the
peak and the limit in bytes and GiB, a growing list fails no_leak with its bytes per iteration, and
a kept eval graph fails no_pitfalls with the detectors' text and the Python line that made it, and bad markers stop the run with a
usage error naming what is accepted.
"""
import json

import pytest

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
'''


def test_limits_and_leaks(pytester):
    pytester.makepyfile(test_models=TESTS)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines([
        "*_ test_over _*",
        "oomguard: peak 2097152 bytes (0.001953 GiB) in forward is over peak_at_most='1 MiB': "
        "1048576 bytes (0.0009766 GiB)",
    ])
    result.stdout.fnmatch_lines([
        "oomguard: leak: live bytes grow by 4096 bytes per iteration (live after each iteration: 4096, 8192, 12288)",
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


def test_report_table_and_json(pytester):
    pytester.makepyfile(test_models=TESTS)
    out = pytester.path / "oomguard.json"
    result = pytester.runpytest(*PLUGIN, "--oomguard", f"--oomguard-json={out}", "-k", "under or over")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*= oomguard report =*",
        "test * peak bytes * peak * phase * outcome",
        "test_models.py::test_over * 2097152 * 2.00 MiB * forward * pass",
        "test_models.py::test_under * 1000 * 1000 bytes * forward * pass",
    ])
    tests = {t["test"]: t for t in json.loads(out.read_text())["tests"]}
    assert sorted(tests) == ["test_models.py::test_over", "test_models.py::test_under"]
    assert tests["test_models.py::test_over"]["peak_bytes"] == 2097152
    assert tests["test_models.py::test_under"]["phase_peak_bytes"] == {"forward": 1000, "setup": 0}
    assert tests["test_models.py::test_under"]["card"] == "NVIDIA T4 16GB"


def test_unmarked_tests_measured_with_the_option_only(pytester):
    pytester.makepyfile(test_plain="import torch\ndef test_plain():\n    torch.empty(5000, dtype=torch.uint8)\n")
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*oomguard report*")
    result = pytester.runpytest(*PLUGIN, "--oomguard")
    result.stdout.fnmatch_lines(["test_plain.py::test_plain * 5000 * setup * pass"])


@pytest.mark.parametrize(
    "marker, message",
    [
        ('card="t5"', f"unknown card 't5'; known cards: {KNOWN_CARDS} (see `oomguard cards`)"),
        ('peak_at_most="2 parsecs"', f"peak_at_most: invalid size '2 parsecs': unknown unit 'parsecs'; {SIZES}"),
        ('cap="lots"', f"invalid size 'lots': {SIZES}"),
        ('backend="cuda"', "backend='cuda' is not one of cpu, meta (cuda: not yet)"),
        ('peak="2GiB"', "unknown argument 'peak'; accepted: card, backend, cap, peak_at_most, no_leak, no_pitfalls"),
    ],
)
def test_bad_marker_is_a_usage_error(pytester, marker, message):
    pytester.makepyfile(test_bad=f"import pytest\n@pytest.mark.oomguard({marker})\ndef test_it():\n    pass\n")
    result = pytester.runpytest(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: test_bad.py::test_it: @pytest.mark.oomguard: {message}"])
