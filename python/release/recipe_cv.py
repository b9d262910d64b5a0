#!/usr/bin/env python3
"""K-fold cross-validation of a diode-train recipe on the non-test problems.

    python python/release/recipe_cv.py --train build/models/diode-train --data datasets/nvidia-h100-80gb \
        --folds 4 --name base -- --epochs 150 --seed 1

Runs `diode-train ... --cv-folds K --cv-fold f` for every fold (the test split is
never trained or judged on here), pools the trainer's per-problem `val-problem`
lines and prints one row: overall top-1 / top-5 / top-10 geomean and p90 over
every non-test problem, per op and per dtype top-1 (per dtype with DEFAULT + cuBLAS's), and how often the model's top-1 is ATen.
--seeds runs every fold once per seed and pools those too.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile


def _summary_stats():
    """torch_diode/summary_stats.py, the one definition of the statistics (as `diode validate`),
    loaded from its file under the name bench/stats.py uses: importing the package would
    import torch and install the hook, which a tool reading JSON must not trigger (nor change
    the environment of whoever imports it)."""
    import importlib.util
    name = "torch_diode_summary_stats"
    if name not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "torch_diode", "summary_stats.py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


geomean, p90 = _summary_stats().geomean, _summary_stats().p90


def per_group(rows: list[dict]) -> dict:
    """Top-1 geomean per op, and per dtype next to DEFAULT + cuBLAS's (the issue's per-op
    and per-dtype lines), over the pooled per-problem rows."""
    by = {"op": collections.defaultdict(list), "dtype": collections.defaultdict(list)}
    for r in rows:
        for key, groups in by.items():
            groups[r[key]].append(r)
    out = {f"top1_per_{key}": {g: round(geomean([r["top1"] for r in v]), 4) for g, v in sorted(groups.items())}
           for key, groups in by.items()}
    out["default_per_dtype"] = {g: round(geomean([r["default"] for r in v]), 4)
                                for g, v in sorted(by["dtype"].items())}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--hardware", default="nvidia-h100-80gb")
    ap.add_argument("--folds", type=int, default=4)
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--name", default="run")
    ap.add_argument("--json", help="append the pooled result as one JSON line to this file")
    ap.add_argument("--rows", help="write every pooled per-problem row to this JSON file")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    rows = []
    for seed in a.seeds.split(","):
        for f in range(a.folds):
            with tempfile.TemporaryDirectory() as out:
                cmd = [a.train, "--hardware", a.hardware, "--data", a.data, "--out", out, "--quiet",
                       "--cv-folds", str(a.folds), "--cv-fold", str(f), "--seed", seed] + a.args
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
                for line in r.stdout.splitlines():
                    if line.startswith("val-problem "):
                        t = line.split()
                        rows.append({"problem": t[1], "seed": seed, "op": t[2], "dtype": t[3], "top1": float(t[5]), "top5": float(t[7]),
                                     "top10": float(t[9]), "cublas": float(t[11]), "default": float(t[13]),
                                     "aten": t[-1] == "aten"})
    res = {"name": a.name, "args": " ".join(a.args), "seeds": a.seeds, "n": len(rows)}
    for k in ("top1", "top5", "top10", "cublas", "default"):
        v = [r[k] for r in rows]
        res[k] = [round(geomean(v), 4), round(p90(v), 4)]
    res.update(per_group(rows))
    res["top1_max"] = round(max(r["top1"] for r in rows), 3)
    res["aten_top1"] = sum(r["aten"] for r in rows)
    print(json.dumps(res))
    if a.rows:
        with open(a.rows, "w") as fh:
            json.dump(rows, fh)
    if a.json:
        with open(a.json, "a") as fh:
            fh.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
