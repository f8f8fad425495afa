"""oomguard.measure: the context manager and decorator over the C++ scope (_core.MeasureScope)."""
import contextlib
import functools
import gc
import os
import sys
import threading
import warnings

import torch

from oomguard import _core, cuda_choices, meta_kernels
from oomguard.ddp_on_meta import DdpOnMeta
from oomguard.fast_path_on_meta import FastPathOnMeta
from oomguard.meta_autocast import AutocastSeenOnMeta, MetaAutocast
from oomguard.fsdp_on_meta import Fsdp2OnMeta
from oomguard.ranks import RankOfMeasurement
from oomguard.tracking import gradient_reader, is_sharded, local, optimizer_of, parameters_of

BACKENDS = ("cpu", "meta", "cuda")
_active = threading.local()


def _optimizer_step_hooks():
    """Every torch.optim optimizer's step tells the core it is stepping: what torch.tensor(number) makes
    there is a host `step` count, as on a GPU (Note [The Python optimizer's step counts],
    backends/host_scalars.h). Returns the hooks' handles."""
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    return (register_optimizer_step_pre_hook(lambda *_: _core.set_in_python_optimizer_step(True)),
            register_optimizer_step_post_hook(lambda *_: _core.set_in_python_optimizer_step(False)))


# Note [The cuda backend in Python]: backend="cuda" runs the C++ cuda backend in this process, as
# `oomguard run --backend cuda` runs it in a child: PyTorch's own caching allocator on GPU 0, capped at
# the card (torch.cuda.set_per_process_memory_fraction's rule: reserved bytes), its cache emptied and
# its statistics reset at the start, the CUDA libraries' workspaces taken first (in the peaks, as
# PyTorch's are: result.cuda.allocated_at_start_bytes), every request booked in the ledger as the
# allocator sees it (peaks, phases, live bytes, diagnoses). result.cuda holds torch.cuda.memory_stats()'s
# peaks over the measurement; result.reserved_peak_bytes is its reserved peak. Unlike cpu and meta there
# is no model to configure (verdict=, alloc_conf=), and inject= wraps the allocator, which only a
# process that has not started CUDA allows. Not yet run on a GPU: ci/gpu_check.sh runs
# ci/gpu_python_check.py, which compares it with cpu and meta's card mode, whenever a GPU is lent.
def _check_cuda(verdict, alloc_conf, inject):
    """backend="cuda": PyTorch's own caching allocator on GPU 0 under the cap (Note [The cuda backend in
    Python]); what it cannot do is refused here, before anything runs."""
    if not torch.cuda.is_available():
        raise ValueError("oomguard.measure: backend=\"cuda\" needs a GPU, and this torch sees none "
                         "(torch.cuda.is_available() is False): measure on backend=\"cpu\" (exact bytes) or "
                         "backend=\"meta\", kernels=\"cuda\" (the card's CUDA kernels, shapes only, any size)")
    if verdict is not None:
        raise ValueError(f"oomguard.measure: verdict={verdict!r} is for cpu and meta, which model the caching "
                         "allocator; on backend=\"cuda\" the GPU's own allocator decides, on its reserved bytes")
    if alloc_conf is not None:
        raise ValueError(f"oomguard.measure: alloc_conf={alloc_conf!r} is for cpu and meta's model; the GPU's "
                         "allocator reads PYTORCH_ALLOC_CONF when CUDA starts: set it in the environment")
    if inject and torch.cuda.is_initialized():
        raise ValueError("oomguard.measure: inject= on backend=\"cuda\" wraps PyTorch's CUDA allocator, which "
                         "must happen before CUDA starts, and this process has used CUDA already: measure with "
                         "inject= before any CUDA tensor (a fresh process), or on backend=\"cpu\"")


def _checked_limits(card, cap):
    """card and cap as the C++ core takes them, or ValueError/TypeError naming what is accepted."""
    for name, value in (("card", card), ("cap", cap)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"oomguard.measure: {name}={value!r} is not a string ({name}=\"t4\" or cap=\"12GiB\")")
    card, cap = card or "", cap or ""
    if card and cap:
        raise ValueError(f"oomguard.measure: card={card!r} and cap={cap!r}: give one of them, not both")
    try:
        if card:
            _core.card_cap_bytes(card)
        if cap:
            _core.parse_bytes(cap)
    except ValueError as e:  # the C++ core's text names what is accepted
        raise ValueError(f"oomguard.measure: {str(e).split(': ', 1)[1]}") from None
    return card, cap


def _checked_inject(inject):
    """inject= as a list of specs (`oomguard run --inject`'s grammar), or ValueError/TypeError naming the
    spec and what is accepted (the C++ parser's text)."""
    if inject is None:
        return []
    specs = [inject] if isinstance(inject, str) else inject
    try:
        specs = list(specs)
    except TypeError:
        specs = [specs]
    for spec in specs:
        if not isinstance(spec, str):
            raise TypeError(f"oomguard.measure: inject={inject!r}: each spec is a string (inject=\"nth=3\" or a list of them)")
        error = _core.inject_spec_error(spec)
        if error:
            raise ValueError(f"oomguard.measure: inject: {error}")
    return specs


def _checked_snapshot(snapshot):
    """snapshot= as a path the C++ core can write, or ValueError/TypeError saying why not."""
    if snapshot is None:
        return ""
    if not isinstance(snapshot, (str, os.PathLike)):
        raise TypeError(f"oomguard.measure: snapshot={snapshot!r} is not a path (snapshot=\"out.pickle\")")
    path = os.fspath(snapshot)
    error = _core.snapshot_path_error(path) if path else "an empty path"
    if error:
        raise ValueError(f"oomguard.measure: snapshot {error}")
    return path


# What to do when the user's code needs a value on meta (PyTorch: "Tensor.item() cannot be called on meta tensors").
_NO_VALUES_ON_META = ("meta tensors have shapes and no values, so .item(), printing a tensor or a branch on "
                      "its value cannot run there: where the loop keeps a number, sum into a tensor "
                      "(total += loss.detach()); where library code branches on data (a mask that is all "
                      "ones), say what it would read: with m.assume(True): ...; or measure on "
                      "backend=\"cpu\" (exact bytes, real values)")


class OomguardWarning(UserWarning):
    """A measurement's warning (m.result.warnings) as the pytest plugin reports it: a number that is not the
    card's (an allocation not modelled, a path meta cannot take) or a measurement that missed something."""


class Measure:
    """A measurement of the code inside `with` (or of a decorated function's calls)."""

    def __init__(self, card=None, backend="cpu", cap=None, kernels=None, verdict=None, alloc_conf=None, inject=None,
                 snapshot=None, world=None, rank=None, eval_no_grad=False):
        if backend not in BACKENDS:
            raise ValueError(f"oomguard.measure: backend={backend!r} is not one of {', '.join(BACKENDS)}")
        if backend == "cuda":
            _check_cuda(verdict, alloc_conf, inject)
        self.card, self.cap = _checked_limits(card, cap)
        self.backend = backend
        if kernels not in (None, "cpu", "cuda"):
            raise ValueError(f"oomguard.measure: kernels={kernels!r} is not one of cpu, cuda")
        if kernels is not None and backend != "meta":
            raise ValueError(f"oomguard.measure: kernels={kernels!r} needs backend=\"meta\" "
                             f"(backend={backend!r} runs its own kernels)")
        self.kernels = kernels or ""
        if verdict not in (None, "reserved", "allocated"):
            raise ValueError(f"oomguard.measure: verdict={verdict!r} is not one of reserved, allocated")
        if alloc_conf is not None and not isinstance(alloc_conf, str):
            raise TypeError(f"oomguard.measure: alloc_conf={alloc_conf!r} is not a string "
                            "(alloc_conf=\"expandable_segments:True\")")
        self.verdict, self.alloc_conf = verdict or "", alloc_conf or ""
        self._rank = RankOfMeasurement(world, rank)
        self._fsdp_on_meta, self._ddp_on_meta = Fsdp2OnMeta(), DdpOnMeta()
        self._fast_path_on_meta, self._autocast_on_meta = FastPathOnMeta(), AutocastSeenOnMeta()
        self.inject = _checked_inject(inject)
        self.snapshot = _checked_snapshot(snapshot)
        self.eval_no_grad = bool(eval_no_grad)
        self.result = None
        self._scope = None
        self._sharded = {}  # id -> a DTensor parameter track() was given (Note [A rank's share of a DTensor])

    @property
    def device(self):
        """Where to build the model and the batches: torch.device("cpu"), ("meta") or ("cuda", 0), the GPU
        the cuda backend caps."""
        return torch.device("cuda", 0) if self.backend == "cuda" else torch.device(self.backend)

    def autocast(self, dtype=torch.bfloat16):
        """torch.autocast for this measurement's device: `with m.autocast(torch.bfloat16): loss = ...`.

        On cpu and cuda, torch.autocast on that device. On meta, torch.autocast cannot serve (device_type
        "meta" is refused, and "cpu" or "cuda" casts no meta tensor: the run would save fp32 where the card
        saves bf16, without a word), so oomguard's own: the cpu's autocast table, or with kernels="cuda"
        CUDA's (layer_norm and softmax in fp32, cross entropy's bf16 log-probabilities; README, "Meta as
        a card"). Enter it inside the measurement, around the forward and the loss; on meta, `with ... as
        table` says whose table casts: "cpu" or "cuda"."""
        names = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
        if dtype not in names:
            raise ValueError(f"oomguard.measure: autocast dtype={dtype!r} is not torch.bfloat16 or torch.float16")
        if self.backend != "meta":
            return torch.autocast(self.backend, dtype=dtype)
        return MetaAutocast(names[dtype])  # Note [Autocast on meta as the loop sees it]

    def __enter__(self):
        if getattr(_active, "scope", None) is not None:
            raise RuntimeError("oomguard.measure: a measurement is already running on this thread")
        self.result = None
        self._sharded = {}
        # Tensors alive when the measurement starts are booked as live: not those of earlier code's garbage
        # (an FSDP module, a model with hooks: reference cycles that only the collector frees).
        gc.collect()
        self._rank.enter()  # before the scope: the group's own setup is not the rank's training memory
        try:
            self._scope = _core.MeasureScope(self.backend, self.card, self.cap, self.kernels, self.verdict,
                                             self.alloc_conf, self.inject, self.snapshot, self.eval_no_grad)
        except ValueError as e:  # an alloc_conf PyTorch would refuse, given or from PYTORCH_ALLOC_CONF
            self._rank.exit()
            raise ValueError(f"oomguard.measure: {str(e).removeprefix('oomguard::Measure: ')}") from None
        except BaseException:
            self._rank.exit()
            raise
        if self.backend == "meta":  # after the scope: it registers oomguard's own Meta kernels
            meta_kernels.use_cpp_meta_kernels()  # Note [Which Meta kernel runs in Python]
            meta_kernels.python_only_ops_run()
            self._fsdp_on_meta.enter()  # Note [FSDP2 on meta]
            self._ddp_on_meta.enter()  # Note [DDP on meta]
            self._fast_path_on_meta.enter()  # Note [Meta takes the attention fast path in Python]
            self._autocast_on_meta.enter()  # Note [Autocast on meta as the loop sees it]
        self._cuda_picks = cuda_choices.picked_as_for_cuda() if self.kernels == "cuda" else contextlib.nullcontext()
        self._cuda_picks.__enter__()  # Note [PyTorch's Python choices for CUDA tensors]
        self._step_hooks = _optimizer_step_hooks()  # Note [The Python optimizer's step counts]
        _core.set_python_caller_thread(True)  # Note [Python's wrapped numbers]
        _active.scope = self._scope
        return self

    def __exit__(self, exc_type, exc, tb):
        scope, self._scope, _active.scope = self._scope, None, None
        _core.set_loop_code(None)
        for hook in self._step_hooks:
            hook.remove()
        _core.set_in_python_optimizer_step(False)  # a step that raised never reached its post hook
        _core.set_python_caller_thread(False)
        self._cuda_picks.__exit__(None, None, None)
        foreach_norm = cuda_choices.foreach_norm_warnings() if self.kernels == "cuda" else []
        self._autocast_on_meta.exit()
        self._fast_path_on_meta.exit()
        self._ddp_on_meta.exit()
        self._fsdp_on_meta.exit()
        self.result = scope.finish() if exc is None else scope.finish_with_error(str(exc))
        if self.backend == "meta" and isinstance(exc, RuntimeError) and "on meta tensors" in str(exc) \
                and hasattr(exc, "add_note"):  # Python 3.11 on
            exc.add_note(f"oomguard.measure(backend=\"meta\"): {_NO_VALUES_ON_META}")
        self._rank.label(self.result)
        self._rank.exit()
        if self.backend == "meta":
            self.result.warnings = list(self.result.warnings) + self._fast_path_on_meta.warnings + foreach_norm
            unmirrored = meta_kernels.python_only_ops_run()
            if unmirrored:
                self.result.warnings = list(self.result.warnings) + [
                    f"{', '.join(unmirrored)} ran on torch's Python Meta kernels (torch/_meta_registrations.py; "
                    "LibTorch has none), which meta does not mirror yet: their bytes on meta are not cpu's. "
                    "Run it on cpu for exact bytes"]
        if self.result.snapshot_error:  # the measurement stands; the file the caller asked for is not there
            warnings.warn(f"oomguard.measure: snapshot not written: {self.result.snapshot_error}", RuntimeWarning,
                          stacklevel=2)
        return False  # an exception (torch.OutOfMemoryError included) goes on to the caller

    def _running(self, what):
        if self._scope is None:
            raise RuntimeError(f"oomguard.measure: {what} outside the measurement (inside `with oomguard.measure(...) as m:`)")
        return self._scope

    @contextlib.contextmanager
    def phase(self, name):
        """Makes `name` ("forward", "backward", "optimizer", "eval", ...) the current phase inside."""
        scope = self._running("phase()")
        _core.set_loop_code(sys._getframe(2).f_code)  # the caller's, past contextlib's __enter__
        previous = scope.phase
        scope.set_phase(name)
        unwinding = False
        try:
            yield
        except BaseException:
            unwinding = True  # the phase's end is not measured from an exception's debris, as in C++
            raise
        finally:
            if self._scope is scope:
                scope.set_phase(previous, unwinding)

    def assume(self, value):
        """On meta: inside, a value read from a meta tensor (.item(), bool(), `if tensor:`) is `value`
        instead of PyTorch's error, for library code that branches on data the memory does not depend on
        (Note [A value assumed on meta], meta_kernels.py): `with m.assume(True): loss = hf_model(...)`.
        Elsewhere tensors have their values and this changes nothing."""
        self._running("assume()")
        if self.backend != "meta":
            meta_kernels.assumed_value(value)  # the same check of `value`
            return contextlib.nullcontext()
        return meta_kernels.assumed_value(value)

    @contextlib.contextmanager
    def deferred_init(self):
        """PyTorch's meta-device initialization, on every backend (Note [Deferred init on the meta backend]):
        inside, tensors are made on torch.device("meta") and no device holds them; build the model and
        fully_shard it here, then `model.to_empty(device=m.device)` after: what the rank holds is what
        to_empty materializes (its shards), as a GPU loop's `with torch.device("meta"):` ... to_empty("cuda")."""
        self._running("deferred_init()")
        with torch.device("meta"):
            if self.backend == "meta":
                with _core.UncountedMeta():
                    yield
            else:
                yield

    def iterations(self, n):
        """The training loop's iterations, 1..n, as ctx.Iterations() in C++: live bytes after each,
        the leak verdict, and 2 at least when a tracked optimizer keeps state (m.result.steady_state)."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"oomguard.measure: iterations(n={n!r}): n must be an int >= 1")
        scope = self._running("iterations()")
        _core.set_loop_code(sys._getframe(1).f_code)  # diagnoses name the loop's line too
        count = scope.iterations(n)

        def loop():
            for index in range(1, count + 1):
                scope.begin_iteration(index)
                yield index
                scope.end_iteration()  # not reached past a break or an exception: only completed ones count

        return loop()

    def track(self, *things):
        """Tells the measurement which tensors are parameters (nn.Modules, tensors, iterables of them)
        and which optimizer's state to read (torch.optim.Optimizer), as ctx.Track in C++."""
        scope = self._running("track()")
        parameters = []
        for thing in things:
            optimizer = optimizer_of(thing, self.device)
            if optimizer is not None:
                scope.track_optimizer(*optimizer)
            else:
                parameters.extend(parameters_of(thing))
        sharded = {id(p): p for p in parameters if is_sharded(p)}
        if sharded:  # Note [A rank's share of a DTensor]
            self._sharded.update(sharded)
            scope.track_gradients(gradient_reader(list(self._sharded.values())))
        scope.track([local(p) for p in parameters])

    @property
    def world(self):
        """How many ranks the measured run has (1 without a process group)."""
        return self._rank.world

    @property
    def rank(self):
        """Which of them this process is."""
        return self._rank.rank

    @property
    def live_bytes(self):
        return self._scope.live_bytes if self._scope is not None else None

    def __call__(self, function):
        @functools.wraps(function)
        def measured(*args, **kwargs):
            with self:
                return function(*args, **kwargs)

        return measured


def measure(card=None, backend="cpu", cap=None, kernels=None, verdict=None, alloc_conf=None, inject=None,
            snapshot=None, world=None, rank=None, eval_no_grad=False):
    """oomguard.measure(card="t4" | cap="1GiB", backend="cpu" | "meta" | "cuda", kernels="cpu" | "cuda",
    verdict="reserved" | "allocated", alloc_conf="expandable_segments:True", inject="nth=3" | [specs],
    snapshot="out.pickle", world=N, rank=r): a context manager and decorator.

    backend="cuda" runs on GPU 0 with PyTorch's own caching allocator capped at the card (m.result.cuda:
    torch.cuda.memory_stats()'s peaks; Note [The cuda backend in Python]). kernels="cuda" (meta only)
    mirrors PyTorch's CUDA kernels at the card's compute capability (t4's without a card, sm_80 with only
    a cap) rather than cpu's. Under a card or a cap the verdict is on the
    reserved bytes of a model of PyTorch's CUDA caching allocator (m.result.cuda_model), as on the GPU;
    verdict="allocated" judges the tensors' bytes alone. alloc_conf: the model's settings in
    PYTORCH_ALLOC_CONF's syntax (None: the environment's PYTORCH_ALLOC_CONF). inject= fails chosen
    allocations with torch.OutOfMemoryError, in `oomguard run --inject`'s grammar (nth=N, min-size=SIZE,
    p=P[,seed=S], phase=NAME; several specs: any may fire); result.oom.injected and result.injection (the
    spec, the requests seen, each failure's request index, bytes and phase) say what fired. snapshot= writes
    the memory_viz snapshot of every allocation and free (https://pytorch.org/memory_viz) to that path when
    the measurement ends, passed or failed; result.snapshot is the path written. world=N measures rank r (0
    by default) of N: without a process group, inside PyTorch's fake one (oomguard/ranks.py); inside
    torchrun's or your own, its rank (world= and rank= may then be left out). eval_no_grad=True runs every
    m.phase("eval") under torch.no_grad(), whatever the code does: the fix of eval-keeps-graph, to measure
    what it saves."""
    return Measure(card=card, backend=backend, cap=cap, kernels=kernels, verdict=verdict, alloc_conf=alloc_conf,
                   inject=inject, snapshot=snapshot, world=world, rank=rank, eval_no_grad=eval_no_grad)
