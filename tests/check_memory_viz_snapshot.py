"""Opens the snapshot `oomguard run --snapshot-dir` writes for an OOM with PyTorch's own consumers.

    python tests/check_memory_viz_snapshot.py build/oomguard

Runs a tiny scenario whose first activation does not fit a 300-byte cap, on cpu and on meta, then
loads each pickle with pickle.load, renders it with torch.cuda._memory_viz.trace_plot and
segment_plot (the HTML pages of pytorch.org/memory_viz's "Active Memory Timeline" and "Allocator
State History"; they need no GPU) and the text trace, and checks the bytes: parameters 232, batch 48,
so 280 live when the 96-byte output is refused, and the parameters alone live after the failure.
"""
import json
import os
import pickle
import subprocess
import sys
import tempfile

from torch.cuda import _memory_viz

SCENARIO = {
    "name": "tiny-oom",
    "summary": "a tiny model whose first activation does not fit",
    "backends": ["cpu", "meta"],
    "model": {"layers": [{"kind": "linear", "in": 4, "out": 8}, {"kind": "relu"},
                         {"kind": "linear", "in": 8, "out": 2}]},
    "data": {"batch": 3, "shape": [4], "on_host": False},
    "loop": {"iterations": 1, "loss": "mean", "optimizer": {"kind": "sgd"}},
    "variants": {"base": {}},
    "expect": {"base": {"outcome": "oom"}},
}


def check(condition, message):
    if not condition:
        sys.exit("FAILED: " + message)


def live_before_oom(trace):
    """Replays the trace: bytes allocated and not freed when the oom entry comes."""
    live = 0
    for entry in trace:
        if entry["action"] == "alloc":
            live += entry["size"]
        elif entry["action"] == "free_completed":
            live -= entry["size"]
        elif entry["action"] == "oom":
            return live
    sys.exit("FAILED: no oom entry in the trace")


def check_backend(oomguard, folder, scenario, backend):
    snaps = os.path.join(folder, "snaps-" + backend)
    results = os.path.join(folder, "results-" + backend + ".json")
    # On the tensors' bytes: under the default verdict 300 B holds no 2 MiB segment of the caching allocator.
    run = subprocess.run([oomguard, "run", scenario, "--backend", backend, "--cap", "300B", "--verdict", "allocated",
                          "--snapshot-dir", snaps, "--json", results], capture_output=True, text=True)
    check(run.returncode == 0, f"{backend}: oomguard run exited {run.returncode}\n{run.stdout}{run.stderr}")
    path = os.path.join(snaps, f"tiny-oom.base.{backend}.pickle")
    measurement = json.load(open(results))["scenarios"][0]["variants"][0]["measurement"]
    check(measurement["snapshot"] == path, f"{backend}: results name {measurement.get('snapshot')}, not {path}")
    check(measurement["oom"]["live_bytes"] == 280, f"{backend}: oom.live_bytes {measurement['oom']['live_bytes']}")

    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    check(set(snapshot) >= {"segments", "device_traces"}, f"{backend}: keys {sorted(snapshot)}")
    check(len(snapshot["device_traces"]) == 1, f"{backend}: {len(snapshot['device_traces'])} device traces")
    trace = snapshot["device_traces"][0]
    ooms = [e for e in trace if e["action"] == "oom"]
    check(len(ooms) == 1, f"{backend}: {len(ooms)} oom entries")
    check(ooms[0]["size"] == 96 and ooms[0]["device_free"] == 20, f"{backend}: oom entry {ooms[0]}")
    check([f["name"] for f in ooms[0]["frames"]] ==
          ["the forward of layer 0:linear", "phase forward", f"variant base on {backend}"],
          f"{backend}: oom frames {ooms[0]['frames']}")
    check(live_before_oom(trace) == 280, f"{backend}: {live_before_oom(trace)} bytes live at the oom, not 280")
    peak, live = 0, 0
    for entry in trace:
        live += entry["size"] if entry["action"] == "alloc" else -entry["size"] if entry["action"] == "free_completed" else 0
        peak = max(peak, live)
    check(peak == 280, f"{backend}: peak {peak}, not 280")
    segments = snapshot["segments"]
    check(sum(s["total_size"] for s in segments) == 232 == live,
          f"{backend}: segments hold {sum(s['total_size'] for s in segments)}, the trace ends at {live}")
    check(sorted(s["total_size"] for s in segments) == [8, 32, 64, 128], f"{backend}: segment sizes")
    for s in segments:
        check(len(s["blocks"]) == 1 and s["blocks"][0]["state"] == "active_allocated"
              and s["blocks"][0]["address"] == s["address"], f"{backend}: segment {s}")

    timeline = _memory_viz.trace_plot(snapshot)
    history = _memory_viz.segment_plot(snapshot)
    check("Active Memory Timeline" in timeline and "Allocator State History" in history, f"{backend}: plots")
    text = _memory_viz.trace(snapshot)
    check("raise OutOfMemoryError # 96.0B requested, 20.0B free in CUDA" in text, f"{backend}: trace text\n{text}")
    print(f"{backend}: {path}: {len(trace)} trace entries, {len(segments)} segments, 280 bytes live at the oom")


def main():
    oomguard = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="oomguard-memory-viz-") as folder:
        scenario = os.path.join(folder, "tiny-oom.json")
        with open(scenario, "w") as f:
            json.dump(SCENARIO, f)
        for backend in ("cpu", "meta"):
            check_backend(oomguard, folder, scenario, backend)


if __name__ == "__main__":
    main()
