"""The 7B decoder's training step under PyTorch's MemTracker with FakeTensorMode: what oomguard's
meta backend is compared with, process to process (README, "Benchmarks").

    ~/.cache/oomguard/torch-2.11.0/bin/python bench/memtracker_7b.py
    # against: build/oomguard run --backend meta examples/pytorch-model/llm-7b.json

The model is examples/pytorch-model/make_models.py's GPT at 7B shape (the same module
examples/pytorch-model/llm-7b.json runs as TorchScript), in bfloat16, batch 1 x 2048 tokens,
cross-entropy and AdamW, one step, as the scenario does. Prints the process's wall time so far, the
step's, and MemTracker's peak.
"""

import os
import sys
import time

START = time.monotonic()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.distributed._tools.mem_tracker import MemTracker  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "pytorch-model"))
from make_models import GPT, GPT_7B  # noqa: E402


def main() -> None:
    imported = time.monotonic()
    torch.set_default_dtype(torch.bfloat16)  # .to() cannot swap a fake module's parameters
    with FakeTensorMode():
        model = GPT(**GPT_7B)
        adamw = torch.optim.AdamW(model.parameters(), lr=3e-4)
        ids = torch.randint(0, GPT_7B["vocab"], (1, GPT_7B["seq"]))
        tracker = MemTracker()
        tracker.track_external(model, adamw)
        step_start = time.monotonic()
        with tracker:
            logits = model(ids)
            F.cross_entropy(logits.view(-1, logits.size(-1)), ids.view(-1)).backward()
            adamw.step()
        step = time.monotonic() - step_start
        snapshot = tracker.get_tracker_snapshot("peak")
    peak = max(stats.get("Total", 0) for stats in snapshot.values())
    print(f"import {imported - START:.2f} s, model and step {time.monotonic() - imported:.2f} s (step {step:.2f} s), "
          f"peak {peak / 2**30:.2f} GiB; wall so far {time.monotonic() - START:.2f} s")


if __name__ == "__main__":
    main()
