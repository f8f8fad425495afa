"""oomguard for your own Python training loop: its memory measured in this process, under a cap.

    import oomguard
    with oomguard.measure(card="t4", backend="cpu") as m:      # or cap="12GiB", backend="meta"
        model = Net().to(m.device); opt = torch.optim.AdamW(model.parameters())
        m.track(model, opt)
        for it in m.iterations(3):                              # 1, 2, 3
            with m.phase("forward"):  loss = model(x).mean()
            with m.phase("backward"): loss.backward()
            with m.phase("optimizer"): opt.step(); opt.zero_grad()
    m.result.peak_bytes, m.result.phase_peak_bytes, m.result.live_after_iteration, m.result.leak
    m.result.breakdown  # {"parameters": ..., "gradients": ..., "optimizer_state": ..., "forward_saved": ...}
    m.result.reserved_peak_bytes, m.result.cuda_model  # the CUDA caching allocator model's numbers

The bytes are booked by oomguard's tracking allocators (the C++ core, oomguard._core), installed in
the torch you imported; an allocation past the cap raises torch.OutOfMemoryError, as on a full GPU,
and m.result.oom.live_by_category says what was live. As `oomguard run`, the cap judges the reserved
bytes of a model of PyTorch's CUDA caching allocator (2 MiB and 20 MiB segments, 512-byte blocks), so
tensors that fit can still run out of memory: measure(verdict="allocated") judges the tensors alone,
measure(alloc_conf="expandable_segments:True") sets the model's PYTORCH_ALLOC_CONF (default: the
environment's). m.result.cuda_model (None with verdict="allocated"): allocated_peak_bytes,
reserved_peak_bytes, fragmentation_bytes, requested_peak_bytes, segments_peak, alloc_retries, ooms,
decides, allocated_at_start_bytes and reserved_at_start_bytes (a card's cuBLAS workspaces, meta with
kernels="cuda"). Importing oomguard installs its tracking allocators: tensors made before the import
stay with PyTorch's allocator (and out of the numbers until freed); import oomguard before building the
model to book everything the loop makes. torch.profiler's memory events keep coming, from oomguard's
allocator. On meta the loop runs the Meta kernels the C++ tool runs, not
torch's Python ones (Note [Which Meta kernel runs in Python], oomguard/meta_kernels.py), so its bytes are
cpu's.

    with oomguard.measure(cap="12GiB", inject="phase=backward,nth=3", snapshot="step.pickle") as m: ...

inject= fails chosen allocations with torch.OutOfMemoryError, in `oomguard run --inject`'s grammar (one
spec or a list; m.result.oom.injected, m.result.injection: the spec, the requests seen, each failure's
request index, bytes and phase); snapshot= writes the memory_viz snapshot of the measurement
(https://pytorch.org/memory_viz) to that path when it ends, passed or not (m.result.snapshot). The pytest
plugin: oomguard/pytest_plugin.py (the marker's inject=, --oomguard-snapshot-dir).
"""
import torch  # first: the extension binds to this torch's libc10, libtorch_cpu and libtorch_python

try:
    from oomguard import _core
except ImportError as e:  # most often a torch other than the one oomguard was built with (missing symbols)
    raise ImportError(f"oomguard: its C++ core does not load into torch {torch.__version__} "
                      f"(from {torch.__file__}): {e}. Build oomguard against this torch "
                      "(pip install --no-build-isolation ./python, with this torch installed)") from None
# One torch in the process: the module runs on the libraries of the torch it was built with.
if torch.__version__.split("+")[0] != _core.built_for_torch:
    raise ImportError(f"oomguard was built for torch {_core.built_for_torch}, and this process imported "
                      f"torch {torch.__version__} (from {torch.__file__}); reinstall oomguard with this torch "
                      "(pip install --no-build-isolation ./python)")
from oomguard.measure import Measure, OomguardWarning, measure

__all__ = ["measure", "Measure", "OomguardWarning", "Result", "parse_bytes", "card_cap_bytes"]

Result = _core.Measurement
parse_bytes = _core.parse_bytes
card_cap_bytes = _core.card_cap_bytes
