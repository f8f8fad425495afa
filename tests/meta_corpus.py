"""Meta never differs from cpu in silence: scripts a corpus of real models (torchvision's
classification models that torch.jit.script accepts, a small ViT, the modules of tests/corpus/models.py
and the examples' models), runs each through the built oomguard on cpu and on meta, and fails on any
difference in the peak, a phase's peak or the live bytes after an iteration that the meta run does not
announce (a warning in measurement.warnings, or an error saying what meta does not mirror), and on a
meta run that fails for want of a Meta kernel where cpu runs.

    meta_corpus.py OOMGUARD WORK_DIR [EXAMPLES_DIR] [--only NAME,...]

EXAMPLES_DIR holds the examples' scenario files and models (make_fixtures.py writes them); their
variants run as they are. Prints one line per model and exits 1 on an unannounced difference.
"""
import json
import os
import subprocess
import sys
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus"))
import models as corpus_models  # noqa: E402  (tests/corpus/models.py)

# torchvision's classification models that script, at 10 classes on 2 x 3 x 64 x 64 images.
TORCHVISION = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_0", "shufflenet_v2_x0_5",
               "efficientnet_b0", "mnasnet0_5", "regnet_y_400mf", "googlenet", "densenet121"]


def torchvision_models():
    import torchvision.models as tvm
    out = {}
    for name in TORCHVISION:
        kwargs = {"num_classes": 10}
        if name == "googlenet":
            kwargs.update(aux_logits=False, init_weights=False)
        out[name] = (lambda n=name, k=kwargs: getattr(tvm, n)(**k), {"batch": 2, "shape": [3, 64, 64], "classes": 10})
    out["vit_tiny"] = (lambda: tvm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                     hidden_dim=32, mlp_dim=64, num_classes=10),
                       {"batch": 2, "shape": [3, 32, 32], "classes": 10})
    return out


def scenario(name, data, loop_extra=None):
    loop = {"iterations": 2, "loss": "cross_entropy", "optimizer": {"kind": "adamw"},
            "eval": {"batches": 1, "no_grad": True}}
    loop.update(loop_extra or {})
    return {"name": "corpus-" + name, "summary": "meta against cpu: " + name, "backends": ["cpu", "meta"],
            "card": "t4", "seed": 3, "model": {"torchscript": name + ".pt"}, "data": data, "loop": loop,
            "variants": {"train_and_eval": {}}}


def measurements(results_path):
    """Every variant's measurement in a results file: (scenario/variant, backend) -> measurement."""
    out = {}

    def walk(node, scenario_name):
        if isinstance(node, dict):
            scenario_name = node.get("name", scenario_name) if "variants" in node else scenario_name
            if "peak_bytes" in node and "backend" in node and "variant" in node:
                out[(scenario_name + "/" + node["variant"], node["backend"])] = node
                return
            for v in node.values():
                walk(v, scenario_name)
        elif isinstance(node, list):
            for v in node:
                walk(v, scenario_name)

    walk(json.load(open(results_path)), "")
    return out


def numbers(m):
    """The numbers meta must reproduce: peak, each phase's peak, live bytes after each iteration, and
    every allocation (their count and bytes)."""
    out = {"peak_bytes": m["peak_bytes"], "live_bytes_at_end": m["live_bytes_at_end"],
           "alloc_count": m["alloc_count"], "allocated_bytes_total": m["allocated_bytes_total"]}
    for p in m.get("phase_peaks", []):
        out["phase_peak." + p["phase"]] = p["peak_bytes"]
    for i, it in enumerate(m.get("iterations", [])):
        out["iteration[%d].live_after_bytes" % i] = it["live_after_bytes"]
        out["iteration[%d].live_after_backward_bytes" % i] = it["live_after_backward_bytes"]
    return out


def announced(meta):
    """What the meta run says it does not mirror: its warnings about meta, or its not-mirrored error."""
    said = [w for w in meta.get("warnings", []) if "meta" in w]
    # An op without a Meta kernel is a failure where cpu runs, not an announcement; what oomguard knows
    # it does not mirror (a 3-d convolution) says so.
    if meta["outcome"] == "error:meta-kernel-missing" and "is not mirrored on meta" in meta["error"]:
        said.append(meta["error"])
    return said


def run(oomguard, scenario_path, backend, results):
    baselines = os.path.join(os.path.dirname(results), "baselines")  # none: the numbers are compared here
    proc = subprocess.run([oomguard, "run", scenario_path, "--backend", backend, "--json", results,
                           "--baselines", baselines, "--jobs", "2"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not os.path.exists(results):
        raise SystemExit("oomguard run %s --backend %s wrote no results (exit %d):\n%s" %
                         (scenario_path, backend, proc.returncode, proc.stdout[-3000:]))
    return measurements(results)


def compare(label, cpu, meta):
    """One line for the model; True when meta agrees with cpu or announces why not."""
    if cpu["outcome"] != "pass":
        print("FAIL %s: cpu did not pass (%s): %s" % (label, cpu["outcome"], cpu["error"]))
        return False
    said = announced(meta)
    if meta["outcome"] != "pass":
        if said:
            print("ok   %s: meta stops, saying so: %s" % (label, said[0][:160]))
            return True
        print("FAIL %s: meta did not pass (%s) and says nothing of meta: %s" % (label, meta["outcome"], meta["error"]))
        return False
    c, m = numbers(cpu), numbers(meta)
    diffs = ["%s cpu %d meta %d (%+d)" % (k, c[k], m.get(k, -1), m.get(k, -1) - c[k]) for k in c if c[k] != m.get(k)]
    if not diffs:
        print("ok   %s: meta == cpu (peak %d)%s" % (label, c["peak_bytes"], ", warned anyway" if said else ""))
        return True
    if said:
        print("ok   %s: meta differs, announced: %s; %s" % (label, "; ".join(diffs[:3]), said[0][:160]))
        return True
    print("FAIL %s: meta differs from cpu unannounced: %s" % (label, "; ".join(diffs)))
    return False


def main(argv):
    only = None
    if "--only" in argv:
        i = argv.index("--only")
        only = set(argv[i + 1].split(","))
        argv = argv[:i] + argv[i + 2:]
    oomguard, work = argv[1], argv[2]
    examples = argv[3] if len(argv) > 3 else None
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    warnings.filterwarnings("ignore")
    corpus = dict(torchvision_models())
    corpus.update(corpus_models.CORPUS)
    jobs = []  # (label prefix, scenario path)
    for name, (make, data, *extra) in corpus.items():
        if only and name not in only:
            continue
        torch.jit.script(make()).save(os.path.join(work, name + ".pt"))
        path = os.path.join(work, name + ".json")
        with open(path, "w") as f:
            json.dump(scenario(name, data, extra[0] if extra else None), f, indent=1)
        jobs.append(path)
    if examples and not only:
        jobs += [os.path.join(examples, f) for f in ("cnn.json", "gpt.json")]
    ok = True
    for path in jobs:
        stem = os.path.join(work, os.path.basename(path)[:-5])
        cpu = run(oomguard, path, "cpu", stem + ".cpu.results.json")
        meta = run(oomguard, path, "meta", stem + ".meta.results.json")
        for (label, _), c in sorted(cpu.items()):
            m = meta.get((label, "meta"))
            if m is None:
                print("FAIL %s: no meta measurement" % label)
                ok = False
                continue
            ok = compare(label, c, m) and ok
    print("every difference announced" if ok else "meta differs from cpu unannounced (above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
