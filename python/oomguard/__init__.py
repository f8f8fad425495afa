"""oomguard for your own Python training loop: its memory measured in this process, under a cap.

    import oomguard
    with oomguard.measure(cap="1GiB", backend="cpu") as m:
        with m.phase("forward"):
            loss = model(x).pow(2).mean()
        with m.phase("backward"):
            loss.backward()
    m.result.peak_bytes, m.result.phase_peak_bytes["backward"], m.result.alloc_count

The bytes are booked by oomguard's tracking allocators (the C++ core, oomguard._core), installed in
the torch you imported; an allocation past the cap raises torch.OutOfMemoryError, as on a full GPU.
Tensors made before the first measurement stay with PyTorch's allocator (and out of the numbers until
freed); import oomguard before building the model to book everything the loop makes.
"""
import contextlib
import functools
import threading

import torch  # first: the extension binds to this torch's libc10 and libtorch_cpu

from oomguard import _core

__all__ = ["measure", "Measure", "Result"]

Result = _core.Measurement

_active = threading.local()


class Measure:
    """A measurement of the code inside `with` (or of a decorated function's calls)."""

    def __init__(self, card="", backend="cpu", cap=""):
        if backend not in ("cpu", "meta"):
            raise ValueError(f"oomguard.measure: backend {backend!r} is not 'cpu' or 'meta' (cuda: not yet)")
        self.card, self.backend, self.cap = card, backend, "" if cap is None else str(cap)
        self.result = None
        self._scope = None

    def __enter__(self):
        if getattr(_active, "scope", None) is not None:
            raise RuntimeError("oomguard.measure: a measurement is already running on this thread")
        self.result = None
        self._scope = _core.MeasureScope(self.backend, self.card, self.cap)
        _active.scope = self._scope
        return self

    def __exit__(self, exc_type, exc, tb):
        scope, self._scope, _active.scope = self._scope, None, None
        self.result = scope.finish() if exc is None else scope.finish_with_error(str(exc))
        return False  # an exception (torch.OutOfMemoryError included) goes on to the caller

    @contextlib.contextmanager
    def phase(self, name):
        """Makes `name` ("forward", "backward", "optimizer", "eval", ...) the current phase inside."""
        if self._scope is None:
            raise RuntimeError("oomguard.measure: phase() outside the measurement")
        previous = self._scope.phase
        self._scope.set_phase(name)
        try:
            yield
        finally:
            if self._scope is not None:
                self._scope.set_phase(previous)

    @property
    def live_bytes(self):
        return self._scope.live_bytes if self._scope is not None else None

    def __call__(self, function):
        @functools.wraps(function)
        def measured(*args, **kwargs):
            with self:
                return function(*args, **kwargs)

        return measured


def measure(card="", backend="cpu", cap=""):
    """oomguard.measure(card="t4" | cap="1GiB", backend="cpu" | "meta"): a context manager and decorator."""
    return Measure(card=card, backend=backend, cap=cap)
