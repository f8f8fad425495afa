"""Which Meta kernel runs an op in a Python process measured on meta: the one the C++ tool runs.

    meta_kernels.use_cpp_meta_kernels()     # once, when the first meta measurement starts (measure.py)
    meta_kernels.kernel_of("aten::addmm")   # "pytorch-c++", "oomguard", "torch-python" or "none"
    meta_kernels.python_only_ops_run()      # the ops that ran on torch's Python Meta kernels since the last call

Note [Which Meta kernel runs in Python]
An op on meta tensors runs the kernel at the front of its Meta dispatch key. Three libraries register
there, and the later registration wins, silently (c10 warns about an overridden kernel on every key but
Meta):
- PyTorch's C++ Meta kernels (RegisterMeta_*.cpp, the structured kernels' shape functions, and
  CompositeExplicitAutograd kernels, which cover Meta as a default backend kernel), loaded with
  libtorch_cpu. They are all a C++ process (the oomguard CLI, a C++ workload) has, and what
  oomguard's meta backend is tested against cpu with (tests/meta_corpus.py).
- torch/_meta_registrations.py's Python kernels, registered at `import torch` (activate_meta, through the
  library `_meta_lib_dont_use_me_use_register_meta`) for 1,310 aten ops in torch 2.11, 1,080 of which
  have a C++ kernel they override: addmm, mm, uniform_, randn, sum, sqrt, nll_loss, _log_softmax, ...
  Some are decompositions that allocate other temporaries than cpu's kernel: uniform_ (nn.Linear's
  init) makes a same-size tensor and copies it in (2 MiB for a 512x512 weight, cpu 1 MiB), addmm
  (nn.Linear's forward) an extra output-sized one (4 MiB for 512x512 by 512x512, cpu 3 MiB).
- oomguard's own (backends/meta/kernels/meta_kernels*.cpp, Note [Meta kernels mirror the cpu kernels'
  allocations]), registered when the first meta measurement starts (MetaSession): they win over both.
So torch's Python kernels, not the C++ ones, ran the catalog's MLP on meta in Python: 1,028,056 bytes
more at setup and 651,232 more at the fixed loop's peak than cpu. use_cpp_meta_kernels() removes
torch's Python registrations from the Meta key (the library's _destroy: the C++ kernel under each comes
back to the front) and registers the Python kernel again only for the ops that then have no Meta kernel,
wrapped so that a measurement says it ran one (Measure appends the warning: their bytes are not
checked against cpu; the C++ tool fails such an op with error:meta-kernel-missing). It is for the rest
of the process, as oomguard's own Meta kernels are; torch's Python kernels stay in the ops' py_kernels,
which FakeTensorMode and torch.compile run under the Python dispatcher.
"""
import threading

import torch

_lock = threading.Lock()
_python_only = None  # the library holding torch's Python kernels for ops without a C++ one, once switched
_ran = set()  # the ops among those that ran since python_only_ops_run() last read them


def _meta_line(op):
    lines = [l for l in torch._C._dispatch_dump_table(op).splitlines() if l.startswith("Meta:")]
    return lines[0] if lines else ""


def kernel_of(op):
    """Who registered the Meta kernel that runs `op` ("aten::addmm.out", "aten::uniform_") now:
    "oomguard", "torch-python" (torch/_meta_registrations.py), "pytorch-c++" or "none"."""
    line = _meta_line(op)
    if "backend fallback" in line or not line:
        return "none"
    if "_meta_registrations.py" in line or "oomguard/meta_kernels.py" in line:
        return "torch-python"
    if "backends/meta/" in line:
        return "oomguard"
    return "pytorch-c++"


def _python_kernels(names):
    """torch's Python Meta kernel of each op in `names`, picked as activate_meta picks it."""
    from torch._decomp import global_decomposition_table

    kernels = {}
    for table in ("meta", "post_autograd", "pre_autograd"):
        for op, fn in global_decomposition_table[table].items():
            if isinstance(op, torch._ops.OpOverload) and op.name() in names and op not in kernels:
                kernels[op] = fn
    return kernels


_assumed = threading.local()  # Note [A value assumed on meta]: the value a meta tensor reads, on this thread


class assumed_value:
    """Inside, a value read from a meta tensor (.item(), bool(), `if tensor:`) is `value` (Note [A value
    assumed on meta]); scopes nest."""

    def __init__(self, value):
        if isinstance(value, torch.Tensor) or not isinstance(value, (bool, int, float)):
            raise TypeError(f"oomguard.measure: assume(value={value!r}): a bool, int or float")
        self.value = value

    def __enter__(self):
        self._previous = getattr(_assumed, "value", None)
        _assumed.value = self.value

    def __exit__(self, *exc):
        _assumed.value = self._previous
        return False


# Note [A value assumed on meta]: a meta tensor has no values, and torch's Python Meta kernel of
# _local_scalar_dense (what .item(), bool() and a branch on a tensor call) raises. Library code branches on
# values the memory does not depend on, or depends on as a training run's always do: Hugging Face's mask
# helpers ask whether an all-ones attention mask is all ones (masking_utils.py's _ignore_causal_mask_sdpa,
# find_packed_sequence_indices) before they choose is_causal over a materialised mask, so a checkpointed
# Llama stops there on meta. Inside m.assume(value) the read gives `value` in the tensor's dtype, allocating
# nothing, as the C++ MetaItemScope gives 0 (backends/meta/meta_item.h): the user says what the data would
# say on the GPU (True: "all ones, nothing packed").
def _local_scalar_dense(name, fn):
    def kernel(tensor, *args, **kwargs):
        value = getattr(_assumed, "value", None)
        if value is None:
            return fn(tensor, *args, **kwargs)
        if tensor.dtype == torch.bool:
            return bool(value)
        if tensor.dtype.is_floating_point or tensor.dtype.is_complex:
            return float(value)
        return int(value)

    return kernel


def _counted(name, fn):
    if name == "aten::_local_scalar_dense":  # allocates nothing: no warning that its bytes are unchecked
        return _local_scalar_dense(name, fn)

    def kernel(*args, **kwargs):
        _ran.add(name)
        return fn(*args, **kwargs)

    return kernel


def use_cpp_meta_kernels():
    """Makes every op with a C++ Meta kernel run it rather than torch's Python one (Note [Which Meta
    kernel runs in Python]); idempotent. Call after oomguard's own Meta kernels are registered."""
    global _python_only
    with _lock:
        if _python_only is not None:
            return
        import torch._meta_registrations as registrations

        library = registrations._meta_lib_dont_use_me_use_register_meta
        names = {"aten::" + key.split("/")[1] for key in library._op_impls}
        kernels = _python_kernels(names)
        library._destroy()
        _python_only = torch.library.Library("aten", "IMPL", "Meta")
        for op, fn in kernels.items():
            name = op.name()
            if kernel_of(name) == "none":
                _python_only.impl(op, _counted(name, fn))


def python_only_ops_run():
    """The ops that ran on torch's Python Meta kernels since the last call, sorted; forgets them."""
    with _lock:
        ran = sorted(_ran)
        _ran.clear()
    return ran
