"""What the GPU check's Python scripts share (gpu_python_ranks.py, gpu_corpus_check.py): each measurement in a
process of its own, the host's in parallel beside the cuda ones (which run one at a time), and the numbers
compared with cuda's. Standard library only: tests/gpu_check_helpers_test.py imports it without torch."""
import concurrent.futures
import json
import os
import subprocess
import sys


def run_child(script, args, timeout):
    """`python3 script args...` in a fresh process: the JSON of its last line, or {"error": what went wrong}."""
    try:
        done = subprocess.run([sys.executable, os.path.abspath(script), *map(str, args)], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit {done.returncode}: {last[:240]}"}


def measure_each(keys, run, is_cuda):
    """{key: run(*key)}: the cuda keys one at a time (one GPU), the others on a quarter of the host's cores."""
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) // 4)) as pool:
        futures = {pool.submit(run, *k): k for k in keys if not is_cuda(k)}
        for k in keys:
            if is_cuda(k):
                results[k] = run(*k)
        for future, k in futures.items():
            results[k] = future.result()
    return results


def numbers(r):
    """The compared numbers of one result: the ledger's peak per phase, the allocated and reserved peaks."""
    out = {f"ledger {phase}": b for phase, b in sorted(r.get("phase_peaks", {}).items())}
    out.update({"allocated peak": r.get("allocated_peak"), "reserved peak": r.get("reserved_peak")})
    return out


def differences(what, cuda, other, tolerance):
    """One line per number of `other` past `tolerance` of cuda's: "what, name: got against cuda's want (...)"."""
    lines = []
    for name, want in numbers(cuda).items():
        got = numbers(other).get(name)
        if want and got is not None and abs(got - want) > tolerance * want:
            lines.append(f"- {what}, {name}: {got} against cuda's {want} "
                         f"({got - want:+d}, {100.0 * (got - want) / want:+.1f}%)")
    return lines
