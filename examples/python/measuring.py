"""What the examples' tests share: the backends they run on, the plugin's marker on each, a measured
run of a pitfall, and where a diagnosis names a statement."""
import inspect

import oomguard
import pytest

BACKENDS = ("cpu", "meta")


def measured_on_each_backend(**limits):
    """Parametrizes a test over BACKENDS, each run inside @pytest.mark.oomguard(backend=..., **limits)."""
    return pytest.mark.parametrize(
        "backend", [pytest.param(b, marks=pytest.mark.oomguard(backend=b, **limits), id=b) for b in BACKENDS])


def result_of(train, backend, **options):
    """oomguard's result for train(m, **options) on a T4's cap (unmarked tests measure their own)."""
    with oomguard.measure(card="t4", backend=backend) as m:
        train(m, **options)
    return m.result


def line_of(module, statement):
    """Where `statement` is in the module's source, as diagnoses name it: name.py:N (statement)."""
    lines = inspect.getsource(module).splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.strip() == statement)
    return f"{module.__name__}.py:{number} ({statement})"
