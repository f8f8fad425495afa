"""Python.InjectAndSnapshot: oomguard.measure(inject=...) and oomguard.measure(snapshot=...).

inject= fails the allocation request the spec names, in `oomguard run --inject`'s grammar: nth=2 after
a 2048-byte input fails the 2nd request, an nn.Linear(64, 32)'s weight (32 x 64 x 4 = 8192 bytes), with
torch.OutOfMemoryError saying it was injected, and result.oom / result.injection say which request,
its bytes and phase; a spec that never fires is a warning; a bad spec is a ValueError with the C++
parser's text. snapshot= writes the memory_viz pickle of the CLI's writer, passed or not: for a tiny
known sequence of tensors its events, segments and frames (the caller's Python line) are checked
exactly, and after an OOM the refused request is its last event.
"""
import os
import pickle
import sys
import tempfile

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")  # what oomguard sets (Note [One oneDNN ISA on every machine])

import torch
from checks import Checks

import oomguard

torch.set_num_threads(1)
HERE = os.path.basename(__file__)
GIB = 1 << 30


def line_of(text):
    """ "test_inject_snapshot.py:N (text)", as the caller's line is written, for the line holding `text`."""
    with open(__file__) as source:
        for number, line in enumerate(source, 1):
            if line.strip() == text:
                return f"{HERE}:{number} ({text})"
    raise AssertionError(text)


def injected_nth(check):
    error = None
    with_block = oomguard.measure(cap="1GiB", inject="nth=2")
    try:
        with with_block as m:
            x = torch.ones(32, 16)  # request 1: 2048 bytes
            layer = torch.nn.Linear(64, 32)  # request 2: its weight, 8192 bytes
    except torch.OutOfMemoryError as e:
        error = str(e)
    check("nth=2: the error", error,
          "CPU out of memory (injected by oomguard: nth=2, allocation #2 in phase setup). Tried to allocate 8.00 KiB. "
          "The cap is 1024.00 MiB (1073741824 bytes), of which 1024.00 MiB is free. Of the capped memory 2.00 KiB is live "
          "in tensors.")
    r = m.result
    check("nth=2: outcome", r.outcome, "oom")
    check("nth=2: oom", (r.oom.injected, r.oom.requested_bytes, r.oom.phase, r.oom.live_bytes), (True, 8192, "setup", 2048))
    check("nth=2: injection", (r.injection.spec, r.injection.requests_seen), ("nth=2", 2))
    check("nth=2: failures", [(f.allocation_index, f.bytes, f.phase, f.policy) for f in r.injection.failures],
          [(2, 8192, "setup", "nth=2")])
    check("nth=2: the failure's repr", repr(r.injection.failures[0]), "request #2 of 8192 bytes in setup (nth=2)")
    check("nth=2: warnings", list(r.warnings),
          ["the measured code never calls m.iterations(n), so it is measured as one run: live growth, leaks and the "
           "step that repeats (with the optimizer's state) are not measured; loop over m.iterations(n)"])
    del x


def injected_any_of(check):
    """Two specs, any may fire: the forward's 1st request, made after a 1 MiB one the other spec lets pass."""
    caught = []
    with oomguard.measure(cap="1GiB", inject=["min-size=2MiB", "phase=forward,nth=1"]) as m:
        big = torch.empty(1 << 20, dtype=torch.uint8)
        with m.phase("forward"):
            try:
                torch.empty(4096, dtype=torch.uint8)
            except torch.OutOfMemoryError as e:  # the loop's own handling of an OOM, rehearsed
                caught.append(str(e).split(")")[0])
            kept = torch.empty(512, dtype=torch.uint8)
    r = m.result
    check("any of: caught", caught, ["CPU out of memory (injected by oomguard: min-size=2097152 | phase=forward,nth=1, "
                                   "allocation #2 in phase forward"])
    check("any of: outcome", (r.outcome, r.oom), ("pass", None))
    check("any of: injection", (r.injection.spec, r.injection.requests_seen),
          ("min-size=2097152 | phase=forward,nth=1", 3))
    check("any of: failures", [(f.allocation_index, f.bytes, f.phase) for f in r.injection.failures], [(2, 4096, "forward")])
    del big, kept


def never_fired(check):
    with oomguard.measure(cap="1GiB", inject="nth=99") as m:
        for _ in m.iterations(2):
            torch.empty(100, dtype=torch.uint8)
    r = m.result
    check("never fired: outcome", r.outcome, "pass")
    check("never fired: injection", (r.injection.spec, r.injection.requests_seen, list(r.injection.failures)),
          ("nth=99", 2, []))
    check("never fired: warnings", list(r.warnings),
          ["inject nth=99 never fired: it saw 2 allocation requests and failed none (a fault that never fires tests nothing)"])
    with oomguard.measure(cap="1GiB") as m:
        pass
    check("no inject: injection", m.result.injection, None)


def bad_specs(check):
    check.raises("inject nth=0", lambda: oomguard.measure(inject="nth=0"), ValueError,
                 "oomguard.measure: inject: invalid fault spec 'nth=0': nth must be a whole number >= 1, got '0'")
    check.raises("inject phase=fwd", lambda: oomguard.measure(inject=["nth=1", "phase=fwd"]), ValueError,
                 "oomguard.measure: inject: invalid fault spec 'phase=fwd': unknown phase 'fwd' (phases: setup, "
                 "transfer, forward, backward, optimizer, zero_grad, eval, step)")
    check.raises("inject size=1", lambda: oomguard.measure(inject="size=1"), ValueError,
                 "oomguard.measure: inject: invalid fault spec 'size=1': unknown key 'size'; expected clauses joined "
                 "by ',' from nth=N, min-size=SIZE, p=P, seed=S, phase=NAME (e.g. phase=backward,nth=2)")
    check.raises("inject 3", lambda: oomguard.measure(inject=3), TypeError,
                 "oomguard.measure: inject=3: each spec is a string (inject=\"nth=3\" or a list of them)")


def snapshot_of_a_known_sequence(check, folder):
    path = os.path.join(folder, "sub", "known.pickle")  # a missing folder is created
    with oomguard.measure(cap="1GiB", snapshot=path) as m:
        a = torch.empty(1000, dtype=torch.uint8)
        with m.phase("forward"):
            b = torch.empty(4096, dtype=torch.uint8)
            del a
    check("snapshot: result.snapshot", m.result.snapshot, path)
    check("snapshot: no error", m.result.snapshot_error, "")
    with open(path, "rb") as f:
        s = pickle.load(f)
    check("snapshot: keys", sorted(s), ["device_traces", "oomguard", "segments"])
    check("snapshot: oomguard", s["oomguard"],
          {"scenario": "measure", "variant": "measure", "backend": "cpu", "cap_bytes": GIB, "dropped_events": 0})
    trace = s["device_traces"]
    check("snapshot: one device", len(trace), 1)
    events = trace[0]
    check("snapshot: actions and sizes", [(e["action"], e["size"]) for e in events],
          [("segment_alloc", 1000), ("alloc", 1000), ("segment_alloc", 4096), ("alloc", 4096),
           ("free_requested", 1000), ("free_completed", 1000), ("segment_free", 1000)])
    file = "oomguard::Measure"
    at_a = [{"filename": file, "line": 0, "name": line_of("a = torch.empty(1000, dtype=torch.uint8)")},
            {"filename": file, "line": 0, "name": "phase setup"},
            {"filename": file, "line": 0, "name": "variant measure on cpu"}]
    at_b = [{"filename": file, "line": 0, "name": line_of("b = torch.empty(4096, dtype=torch.uint8)")},
            {"filename": file, "line": 0, "name": "phase forward"},
            {"filename": file, "line": 0, "name": "variant measure on cpu"}]
    check("snapshot: frames of a's alloc", events[1]["frames"], at_a)
    check("snapshot: frames of b's alloc", events[3]["frames"], at_b)
    check("snapshot: frames of a's free (no operator: b's line)", events[5]["frames"], at_b)
    check("snapshot: a freed at its address", events[5]["addr"], events[1]["addr"])
    check("snapshot: every entry's keys", {tuple(sorted(e)) for e in events},
          {("action", "addr", "frames", "size", "stream", "time_us")})
    segments = s["segments"]
    check("snapshot: one segment, b", [(g["address"], g["total_size"], g["allocated_size"], g["segment_type"])
                                       for g in segments], [(events[3]["addr"], 4096, 4096, "small")])
    check("snapshot: its block", [(k["size"], k["state"]) for k in segments[0]["blocks"]], [(4096, "active_allocated")])
    check("snapshot: b's address is its storage's", segments[0]["address"], b.data_ptr())
    check("snapshot: leftovers", sorted(os.listdir(os.path.dirname(path))), ["known.pickle"])


def snapshot_of_an_oom(check, folder):
    path = os.path.join(folder, "oom.pickle")
    try:
        with oomguard.measure(cap="1GiB", backend="meta", snapshot=path) as m:
            x = torch.empty(20 << 20, dtype=torch.uint8, device=m.device)  # a segment of its own size on a GPU
            torch.empty(2 * GIB, dtype=torch.uint8, device=m.device)
    except torch.OutOfMemoryError:
        pass
    check("oom snapshot: outcome", m.result.outcome, "oom")
    with open(path, "rb") as f:
        s = pickle.load(f)
    events = s["device_traces"][0]
    check("oom snapshot: actions", [(e["action"], e["size"]) for e in events],
          [("segment_alloc", 20 << 20), ("alloc", 20 << 20), ("oom", 2 * GIB)])
    check("oom snapshot: device_free", events[2]["device_free"], GIB - (20 << 20))
    check("oom snapshot: its frames' line", events[2]["frames"][0]["name"],
          line_of("torch.empty(2 * GIB, dtype=torch.uint8, device=m.device)"))
    check("oom snapshot: backend", s["oomguard"]["backend"], "meta")
    del x


def snapshot_paths(check, folder):
    check.raises("snapshot a folder", lambda: oomguard.measure(snapshot=folder), ValueError,
                 f"oomguard.measure: snapshot {folder}: is a folder; expected a file name")
    check.raises("snapshot 3", lambda: oomguard.measure(snapshot=3), TypeError,
                 "oomguard.measure: snapshot=3 is not a path (snapshot=\"out.pickle\")")
    with oomguard.measure() as m:
        torch.empty(10)
    check("no snapshot", (m.result.snapshot, m.result.snapshot_error), ("", ""))


def main():
    check = Checks()
    injected_nth(check)
    injected_any_of(check)
    never_fired(check)
    bad_specs(check)
    with tempfile.TemporaryDirectory() as folder:
        snapshot_of_a_known_sequence(check, folder)
        snapshot_of_an_oom(check, folder)
        snapshot_paths(check, folder)
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
