"""The forgotten no_grad of mlp_eval.py: the fix passes oomguard's limits, the pitfall is diagnosed at
its Python line. Run: pytest examples/python (see README.md)."""
import mlp_eval
import pytest
from measuring import BACKENDS, line_of, measured_on_each_backend, result_of


# The fix peaks at 9.1 MiB on cpu and on meta; the pitfall's eight kept graphs take it past 27 MiB.
@measured_on_each_backend(card="t4", peak_at_most="10 MiB", no_leak=True, no_pitfalls=True)
def test_evaluation_under_no_grad_fits(oomguard_measure, backend):
    mlp_eval.train(oomguard_measure, no_grad=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_forgotten_no_grad_is_diagnosed(backend):
    r = result_of(mlp_eval.train, backend, no_grad=False)
    # Each kept output holds its graph: the input batch and both hidden activations it saved, and itself.
    b = mlp_eval
    per_batch = 4 * (b.BATCH * b.FEATURES + 2 * b.BATCH * b.HIDDEN + b.BATCH * b.CLASSES)
    made = (f"AddmmBackward0, made in {line_of(mlp_eval, 'yield model(x)')}, called from "
            f"{line_of(mlp_eval, 'outputs = list(predictions(model, m.device))')}")
    assert [(d.kind, d.bytes, d.where) for d in r.diagnoses] == [
        ("eval-keeps-graph", b.EVAL_BATCHES * per_batch, made)]
    assert r.peak_phase == "eval" and r.peak_bytes > 27 * 2**20
    assert not r.leak  # the outputs die with the evaluation: the peak, not the live bytes, grows
