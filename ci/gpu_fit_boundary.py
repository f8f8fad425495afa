"""The OOM boundary table of the GPU check (ci/gpu_check.sh): the largest batch that fits each card, from
`oomguard fit` on meta (cpu's kernels), meta in card mode (`--kernels cuda`) and cuda. Reads
OUT/fit-{meta,meta-card,cuda}.json, writes OUT/fit-boundary.md and prints it. A missing or unreadable
results file is a row of its own naming the .txt to read (a run without a GPU has no cuda column).

    python3 ci/gpu_fit_boundary.py OUT_DIR
"""
import json
import os
import sys

COLUMNS = (("meta", "fit-meta"), ("meta --kernels cuda", "fit-meta-card"), ("cuda", "fit-cuda"))


def load(out, stem):
    path = os.path.join(out, stem + ".json")
    try:
        with open(path) as f:
            return json.load(f)["fit"], None
    except (OSError, ValueError, KeyError) as e:
        return None, f"no fit results in {stem}.json ({type(e).__name__}): see {stem}.txt"


def cells(fit):
    if fit is None:
        return {}
    return {(v["variant"], c["card"] or str(c["cap_bytes"])): c["max_value"] for v in fit["variants"] for c in v["cards"]}


def diff(a, b):
    return "-" if a is None or b is None else f"{b - a:+d} ({100.0 * (b - a) / a:+.1f}%)" if a else f"{b - a:+d}"


def main():
    out = sys.argv[1]
    loaded = [load(out, stem) for _, stem in COLUMNS]
    fits = [fit for fit, _ in loaded]
    meta, card, cuda = (cells(fit) for fit in fits)
    first = next((fit for fit in fits if fit is not None), None)
    lines = []
    if first is not None:
        lines.append(f"{first['scenario']}: the largest {first['knob_field']} that fits; cuda against meta with "
                     "cpu's kernels and with the card's CUDA kernels\n")
    lines += ["| variant | card | meta | meta --kernels cuda | cuda | cuda - meta | cuda - card mode |",
              "|---|---|---|---|---|---|---|"]
    for key in dict.fromkeys([*meta, *card, *cuda]):
        a, k, b = meta.get(key), card.get(key), cuda.get(key)
        lines.append(f"| {key[0]} | {key[1]} | {a} | {k} | {b} | {diff(a, b)} | {diff(k, b)} |")
    lines += [f"\n{error}" for _, error in loaded if error]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "fit-boundary.md"), "w") as f:
        f.write(text)
    print(text, end="")
    return 0 if first is not None else 1


if __name__ == "__main__":
    sys.exit(main())
