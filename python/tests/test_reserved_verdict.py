"""Python.ReservedVerdict: under a card or a cap, oomguard.measure judges the reserved bytes of its model
of PyTorch's CUDA caching allocator, as `oomguard run` does (oomguard/measure.h, Note [The in-process
verdict]); verdict="allocated" judges the tensors alone; alloc_conf= sets the model's PYTORCH_ALLOC_CONF.

The bytes, by hand (tests/in_process_measure_test.cpp): each 700 KiB tensor (716800 bytes, a multiple of
512) takes a block of a 2 MiB small-pool segment, which holds two. Five: allocated 3584000 bytes,
reserved 6 MiB; under a 5 MiB cap the fifth needs a third segment (4 + 2 > 5 MiB): torch.OutOfMemoryError
with four live (2867200 bytes), though the five's 3584000 fit. Expandable segments map the small pool in
2 MiB pages: five take two, 4 MiB. A T4's cuBLAS workspaces (8519680 bytes, a block of a 20 MiB segment)
and cuBLASLt's (1048576, a block of a 2 MiB one) are held from the start on meta with kernels="cuda".
"""
import os

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])
for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
    os.environ.pop(name, None)  # the model's defaults

import oomguard
import torch
from checks import Checks

torch.set_num_threads(1)
check = Checks()
MiB = 1 << 20
TENSOR = 700 * 1024


def keeps_five(**kwargs):
    """Five 700 KiB tensors kept at once, in forward; the result, and whether torch.OutOfMemoryError was raised."""
    raised = None
    try:
        with oomguard.measure(**kwargs) as m:
            with m.phase("forward"):
                kept = [torch.empty(TENSOR, dtype=torch.uint8, device=m.device) for _ in range(5)]
                del kept
    except torch.OutOfMemoryError as e:
        raised = str(e)
    return m.result, raised


# (a) The reserved verdict refuses the fifth; the allocated one passes.
r, raised = keeps_five(cap="5MiB")
print(r.describe())
check("outcome (reserved)", r.outcome, "oom")
check("torch.OutOfMemoryError raised", raised is not None and raised.startswith(
    "CPU out of memory (oomguard cap on reserved bytes, as on the GPU). Tried to allocate 700.00 KiB. PyTorch's "
    "caching allocator: reserved 4.00 MiB (allocated 2.73 MiB) + a 2.00 MiB segment would pass the cap 5.00 MiB "
    "(5242880 bytes), even after releasing its cache. 2.73 MiB is live in tensors."), True)
check("oom.requested_bytes", r.oom.requested_bytes, TENSOR)
check("oom.live_bytes", r.oom.live_bytes, 4 * TENSOR)
check("peak_bytes", r.peak_bytes, 4 * TENSOR)
check("reserved_peak_bytes", r.reserved_peak_bytes, 4 * MiB)
c = r.cuda_model
check("cuda_model.decides", c.decides, True)
check("cuda_model.allocated_peak_bytes", c.allocated_peak_bytes, 4 * TENSOR)
check("cuda_model.reserved_peak_bytes", c.reserved_peak_bytes, 4 * MiB)
check("cuda_model.fragmentation_bytes", c.fragmentation_bytes, 4 * MiB - 4 * TENSOR)
check("cuda_model.alloc_retries", c.alloc_retries, 1)
check("cuda_model.ooms", c.ooms, 1)
check("cuda_model.allocated_at_start_bytes", c.allocated_at_start_bytes, 0)
check("cuda_model.reserved_at_start_bytes", c.reserved_at_start_bytes, 0)
check("repr(cuda_model)", repr(c),
      "CudaModel(allocated_peak_bytes=2867200, reserved_peak_bytes=4194304, fragmentation_bytes=1327104, "
      "requested_peak_bytes=2867200, segments_peak=2, alloc_retries=1, ooms=1, decides=True, "
      "allocated_at_start_bytes=0, reserved_at_start_bytes=0)")
check("describe's cuda model line",
      "  cuda model: allocated 2.73 MiB, reserved 4.00 MiB (fragmentation 1.27 MiB), 1 retry, 1 OOM; the verdict "
      "is on reserved bytes\n" in r.describe(), True)

r, raised = keeps_five(cap="5MiB", verdict="allocated")
check("outcome (allocated)", r.outcome, "pass")
check("raised (allocated)", raised, None)
check("peak_bytes (allocated)", r.peak_bytes, 5 * TENSOR)
check("cuda_model (allocated)", r.cuda_model, None)
check("reserved_peak_bytes (allocated)", r.reserved_peak_bytes, None)

# (b) Expandable segments: two pages where segments take three, and the 5 MiB cap fits.
r, _ = keeps_five(cap="8MiB")
check("reserved_peak_bytes (segments)", r.reserved_peak_bytes, 6 * MiB)
r, _ = keeps_five(cap="8MiB", alloc_conf="expandable_segments:True")
check("reserved_peak_bytes (expandable)", r.reserved_peak_bytes, 4 * MiB)
check("allocated_peak_bytes (expandable)", r.cuda_model.allocated_peak_bytes, 5 * TENSOR)
check("outcome (expandable, 5 MiB)", keeps_five(cap="5MiB", alloc_conf="expandable_segments:True")[0].outcome, "pass")
r, _ = keeps_five()
check("no cap: the model predicts", (r.outcome, r.cuda_model.decides, r.reserved_peak_bytes), ("pass", False, 6 * MiB))


# (c) What is held from the start: nothing on cpu's kernels, a T4's workspaces on its CUDA kernels.
def matmul(**kwargs):
    with oomguard.measure(card="t4", **kwargs) as m:
        a = torch.ones(64, 64, device=m.device)
        b = torch.ones(64, 64, device=m.device)
        c = a @ b
        del a, b, c
    return m.result


cpu = matmul()
check("at start, cpu", (cpu.cuda_model.allocated_at_start_bytes, cpu.cuda_model.reserved_at_start_bytes), (0, 0))
t4 = matmul(backend="meta", kernels="cuda")
print(t4.describe())
check("at start, t4 allocated", t4.cuda_model.allocated_at_start_bytes, 8519680 + 1048576)
check("at start, t4 reserved", t4.cuda_model.reserved_at_start_bytes, 22 * MiB)
check("t4 peak_bytes (the ledger's: no workspaces)", t4.peak_bytes, 3 * 64 * 64 * 4)
check("t4 reserved_peak_bytes", t4.reserved_peak_bytes, 22 * MiB)

check.raises("an unknown verdict", lambda: oomguard.measure(cap="5MiB", verdict="bytes"), ValueError,
             "oomguard.measure: verdict='bytes' is not one of reserved, allocated")
bad = oomguard.measure(cap="5MiB", alloc_conf="expandable_segments:true")
check.raises("a bad alloc_conf", bad.__enter__, ValueError,
             "oomguard.measure: alloc_conf: expandable_segments: expected True or False, got 'true'")
raise SystemExit(check.exit_code())
