"""The GPU check's one page (ci/gpu_check.sh): OUT/summary.md, made of the files the check wrote: the
machine, each step's exit code and time, the GPU tests' counts, each catalog run's last line, then the
tables (fidelity.md's differences, fit-boundary.md, python-cuda.md, corpus.md) to paste into README's "On a GPU".
A file a step did not write is named as missing; nothing here fails the check.

    python3 ci/gpu_summary.py OUT_DIR TOTAL_SECONDS > OUT_DIR/summary.md
"""
import os
import re
import sys



def read(out, name):
    try:
        with open(os.path.join(out, name), errors="replace") as f:
            return f.read()
    except OSError:
        return None


def last_line(text):
    lines = [line for line in (text or "").splitlines() if line.strip() and not line.startswith("results:")]
    return lines[-1].strip() if lines else "(no output)"


def gtest_counts(text):
    if text is None:
        return "gpu-tests.txt missing"
    # Each test's result line carries its time; gtest's closing lists name the skipped and failed again without.
    counts = {kind: len(re.findall(rf"^\[\s+{kind}\s+\] \S+\.\S+ \(\d+ ms\)", text, re.M)) for kind in ("OK", "SKIPPED", "FAILED")}
    return f"{counts['OK']} passed, {counts['FAILED']} failed, {counts['SKIPPED']} skipped"


def fidelity_excerpt(text):
    """fidelity.md's header, its rows marked past the tolerance (a mark in the first cell), its closing lines."""
    lines = text.rstrip().splitlines()
    rows = [line for line in lines if line.startswith("|")]
    marked = [row for row in rows[2:] if row.split("|")[1].strip()]
    rest = [line for line in lines if not line.startswith("|") and line.strip()]
    return "\n".join(rows[:2] + (marked or ["| | (none past the tolerance) |"]) + [""] + rest)


def main():
    out, total = sys.argv[1], sys.argv[2]
    print("# GPU check\n")
    for line in (read(out, "version.txt") or "version.txt missing\n").splitlines():
        print(f"    {line}")
    print(f"\nTotal {total} s. Steps (exit 124: timed out; the cpu and meta steps ran beside the cuda ones):\n")
    print("| step | exit | seconds | timeout | last line |\n|---|---|---|---|---|")
    for row in (read(out, "steps.tsv") or "").splitlines():
        name, rc, seconds, limit = row.split("\t")
        text = read(out, f"{name}.txt")
        note = gtest_counts(text) if name == "gpu-tests" else last_line(text)
        print(f"| {name} | {rc} | {seconds} | {limit} | {note.replace('|', '/')[:160]} |")
    text = read(out, "fidelity.md")
    print("\n## Fidelity (cpu, meta, card mode against cuda): the variants past 2% (all of them: fidelity.md)\n")
    print(fidelity_excerpt(text) if text else "fidelity.md missing: see fidelity.txt")
    for title, name in (("The OOM boundary", "fit-boundary.md"), ("The Python package", "python-cuda.md"),
                        ("The model corpus", "corpus.md")):
        text = read(out, name)
        print(f"\n## {title}\n")
        print(text.rstrip() if text else f"{name} missing: see the step's .txt above")


if __name__ == "__main__":
    main()
