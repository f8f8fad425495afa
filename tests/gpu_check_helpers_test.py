"""The GPU check's helpers on made-up results (ci/gpu_check.sh runs them on a device once, where a bug
costs the only try): the cuda shards joined (gpu_merge_results.py), the OOM boundary table
(gpu_fit_boundary.py) with and without a cuda column, and summary.md (gpu_summary.py) from a steps.tsv.
No GPU and no torch: plain files in, exact text out.

    python3 tests/gpu_check_helpers_test.py   # exit 0 when every check holds
"""
import json
import os
import subprocess
import sys
import tempfile

CI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ci")
failures = []


def check(what, got, want):
    if got != want:
        failures.append(what)
        print(f"FAIL {what}:\n  got  {got!r}\n  want {want!r}")


def helper(name, *args):
    done = subprocess.run([sys.executable, os.path.join(CI, name), *args], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


def write(path, data):
    with open(path, "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


def fit(backend, t4, a10):
    cards = [{"card": "t4", "cap_bytes": 1, "max_value": t4}, {"card": "a10", "cap_bytes": 2, "max_value": a10}]
    return {"fit": {"backend": backend, "scenario": "forgotten-no-grad", "knob_field": "data.batch",
                    "variants": [{"variant": "pitfall", "cards": cards}]}}


with tempfile.TemporaryDirectory() as out:
    # Two shards: scenarios in name order, totals added, the longer shard's duration.
    write(f"{out}/cuda-1.json", {"backend": "cuda", "duration_ms": 5.0, "totals": {"PASS": 2},
                                 "scenarios": [{"name": "b"}, {"name": "d"}]})
    write(f"{out}/cuda-2.json", {"backend": "cuda", "duration_ms": 7.0, "totals": {"PASS": 1, "FAIL": 1},
                                 "scenarios": [{"name": "a"}, {"name": "c"}]})
    rc, stdout, _ = helper("gpu_merge_results.py", f"{out}/cuda.json", f"{out}/cuda-1.json", f"{out}/cuda-2.json")
    merged = json.load(open(f"{out}/cuda.json"))
    check("merge: exit", rc, 0)
    check("merge: line", stdout, "joined 2 of 2 shards: 4 scenarios, 1 FAIL, 3 PASS\n")
    check("merge: order", [s["name"] for s in merged["scenarios"]], ["a", "b", "c", "d"])
    check("merge: totals, duration", (merged["totals"], merged["duration_ms"]), ({"PASS": 3, "FAIL": 1}, 7.0))
    rc, _, stderr = helper("gpu_merge_results.py", f"{out}/m.json", f"{out}/cuda-1.json", f"{out}/absent.json")
    check("merge: a missing shard fails the step", (rc, "absent.json" in stderr), (1, True))

    # The boundary without cuda (the rehearsal): its column empty, the missing file named.
    write(f"{out}/fit-meta.json", fit("meta", 348160, 525312))
    write(f"{out}/fit-meta-card.json", fit("meta", 348000, 525000))
    rc, stdout, _ = helper("gpu_fit_boundary.py", out)
    check("boundary without cuda: exit", rc, 0)
    check("boundary without cuda: rows", stdout.splitlines()[4:6],
          ["| pitfall | t4 | 348160 | 348000 | None | - | - |", "| pitfall | a10 | 525312 | 525000 | None | - | - |"])
    check("boundary without cuda: says why", stdout.splitlines()[-1],
          "no fit results in fit-cuda.json (FileNotFoundError): see fit-cuda.txt")
    # With cuda: 348160 -> 345600 is -2560, -2560 / 348160 = -0.735...% (-0.7%); 348000 -> 345600, -0.690% (-0.7%).
    write(f"{out}/fit-cuda.json", fit("cuda", 345600, 525312))
    rc, stdout, _ = helper("gpu_fit_boundary.py", out)
    check("boundary with cuda: t4", stdout.splitlines()[4],
          "| pitfall | t4 | 348160 | 348000 | 345600 | -2560 (-0.7%) | -2400 (-0.7%) |")
    check("boundary with cuda: a10", stdout.splitlines()[5],
          "| pitfall | a10 | 525312 | 525000 | 525312 | +0 (+0.0%) | +312 (+0.1%) |")
    check("boundary file", open(f"{out}/fit-boundary.md").read(), stdout)

    # summary.md: a row per step with its last line (gtest's counts for the GPU tests), a timed-out step.
    write(f"{out}/version.txt", "oomguard 0.1.0\ngpu: none\n")
    write(f"{out}/steps.tsv", "gpu-tests\t0\t3\t120\ncpu\t124\t300\t300\n")
    write(f"{out}/gpu-tests.txt", "[ RUN      ] A.B\n[       OK ] A.B (1 ms)\n[  SKIPPED ] C.D (0 ms)\n"
                                  "[  SKIPPED ] 1 test, listed below:\n[  SKIPPED ] C.D\n")
    write(f"{out}/cpu.txt", "a | b\ngpu_check: cpu timed out after 300 s\n")
    write(f"{out}/fidelity.md", "| | scenario | cpu | cuda |\n|---|---|---|---|\n|  | s | 1 | 1 |\n| ! | t | 1 | 2 |\n"
                                "\n2 variants against cuda\n")
    rc, stdout, _ = helper("gpu_summary.py", out, "42")
    lines = stdout.splitlines()
    check("summary: exit", rc, 0)
    check("summary: total", "Total 42 s." in stdout, True)
    check("summary: gpu tests", "| gpu-tests | 0 | 3 | 120 | 1 passed, 0 failed, 1 skipped |" in lines, True)
    check("summary: timed out", "| cpu | 124 | 300 | 300 | gpu_check: cpu timed out after 300 s |" in lines, True)
    check("summary: fidelity past the tolerance only", ("| ! | t | 1 | 2 |" in lines, "|  | s | 1 | 1 |" in lines),
          (True, False))
    check("summary: python missing", "python-cuda.md missing: see the step's .txt above" in lines, True)
    check("summary: corpus missing", "corpus.md missing: see the step's .txt above" in lines, True)
    write(f"{out}/corpus.md", "| model | backend |\n|---|---|\n| lstm | cuda |\n")
    rc, stdout, _ = helper("gpu_summary.py", out, "42")
    check("summary: the corpus table", "| lstm | cuda |" in stdout.splitlines(), True)

# The corpus table (gpu_corpus_check.py): a cuda row per model, differences past 1% of cuda's number listed
# with sign and percentage, a model whose cuda run failed named, and cpu absent for a bf16 model.
sys.path.insert(0, CI)
import gpu_corpus_check  # noqa: E402  (stdlib only at import)

ok = {"outcome": "pass", "peak": 1000, "phase_peaks": {"forward": 1000}, "allocated_peak": 2000,
      "reserved_peak": 4000, "warnings": []}
results = {("resnet18", "cuda"): ok, ("resnet18", "meta-card"): dict(ok, reserved_peak=4041),
           ("resnet18", "cpu"): dict(ok, allocated_peak=2020),
           ("gpt_bf16", "cuda"): {"error": "exit 1: no GPU"}, ("gpt_bf16", "meta-card"): ok}
keys = [("resnet18", "cpu"), ("resnet18", "meta-card"), ("resnet18", "cuda"), ("gpt_bf16", "meta-card"),
        ("gpt_bf16", "cuda")]
saved_models, gpu_corpus_check.MODELS = gpu_corpus_check.MODELS, ("resnet18", "gpt_bf16")
lines, cuda_ran = gpu_corpus_check.table(keys, results)
gpu_corpus_check.MODELS = saved_models
check("corpus: a failed cuda run", cuda_ran, False)
check("corpus: the cuda row", "| resnet18 | cuda | pass | 1000 | 2000 | 4000 | forward 1000 |  |" in lines, True)
# 4041 - 4000 = +41, 1.025% of 4000: listed; cpu's 2020 is +1.0% exactly: not past the tolerance.
check("corpus: differences", [line for line in lines if line.startswith("- ")],
      ["- resnet18, meta-card, reserved peak: 4041 against cuda's 4000 (+41, +1.0%)",
       "- gpt_bf16: no cuda numbers (exit 1: no GPU)"])

print("FAILED: " + ", ".join(failures) if failures else "all checks hold")
sys.exit(1 if failures else 0)
