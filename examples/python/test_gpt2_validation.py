"""The summed validation loss of gpt2_validation.py: summing detached losses passes oomguard's limits;
summing the loss tensors keeps every validation graph, diagnosed at its Python line. Run: pytest
examples/python (see README.md)."""
import gpt2_validation
import pytest
from measuring import BACKENDS, line_of, measured_on_each_backend, result_of


# The fix peaks at 17.2 MiB on cpu and on meta; the kept graphs add 11.4 MiB an iteration.
@measured_on_each_backend(card="t4", peak_at_most="20 MiB", no_leak=True, no_pitfalls=True)
def test_summing_detached_losses_fits(oomguard_measure, backend):
    gpt2_validation.train(oomguard_measure, detach=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_summing_loss_tensors_is_diagnosed(backend):
    r = result_of(gpt2_validation.train, backend, detach=False)
    made = f"AddBackward0, made in {line_of(gpt2_validation, 'total = total + validation_loss(model, held_out, detach)')}"
    kept = {d.kind: d for d in r.diagnoses if d.where == made}
    assert sorted(kept) == ["eval-keeps-graph", "graph-kept-across-iterations"]
    # What an iteration keeps is its validation forward's saved tensors: at most a forward's.
    graph = kept["graph-kept-across-iterations"].bytes
    assert 0 < graph <= r.breakdown["forward_saved"]
    assert r.leak and r.live_growth_per_iteration_bytes >= graph
    assert r.peak_bytes > 2 * graph
