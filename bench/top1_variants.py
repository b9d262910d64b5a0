"""Would a seed ensemble or an ATen margin lower the model's top-1 regret? Side by side, on a split.

    build/cli/diode validate --dataset datasets/nvidia-h100-80gb --list-split validation --json > val.json
    .venv/bin/python bench/top1_variants.py --split-list val.json --data datasets/nvidia-h100-80gb \\
        --model /tmp/rel15/nvidia-h100-80gb/seed-1 --model ... [--margins 0,0.01,0.02,0.05] [--json out.json]

Why: issue 19's top-1 goal (1.03 on the H100 test split) sits inside the spread of the five
seeds a release trains (test top-1 1.029-1.035 in session 15), so two cheap variants of the
top-1 decision were measured before building either into the bundle format:
- **ensemble**: the mean of the models' predicted log times, then the lowest (a bundle would
  have to carry every seed's weights, and the hook rank with each);
- **ATen margin**: the lowest-scored candidate, but ATen unless that candidate is predicted
  faster by more than the margin (predict mode's rule, `aten_margin`, applied to the whole
  EXHAUSTIVE list, not only the DEFAULT list).
Per problem the candidates and records are `diode validate`'s (predict_aten_margin.problems_of:
the newest collector's records; a failed pick counts as the problem's slowest ok record, as
validate counts it), scored by the hook's ranker; the figures for margin 0 are exactly
validate's top-1 and top-5. Decide on the validation split, never the test split.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from predict_aten_margin import problems_of, read_split_list  # noqa: E402  (validate's grouping, one definition)
from stats import geomean, p90  # noqa: E402  (one definition for every bench script, validate's p90)


def regrets(scores, times: list[float], best: float, aten: int, margins: list[float]) -> dict:
    """{margin: regret of the pick} and "top5" for one problem: the lowest score, or `aten`
    unless that candidate's predicted log time is lower than ATen's by more than log1p(margin)."""
    order = sorted(range(len(times)), key=lambda i: (scores[i], i))  # ties to the first, as validate
    top = order[0]
    out = {}
    for m in margins:
        pick = top if top == aten or scores[aten] - scores[top] > math.log1p(m) else aten
        out[m] = times[pick] / best
    out["top5"] = min(times[i] for i in order[:5]) / best
    return out


def candidate_times(rs: list) -> tuple[list[float], float, int]:
    """(each candidate's time, the best ok time, ATen's index) of one problem's records as
    validate counts them: a failed candidate costs the problem's slowest ok time."""
    ok = [r.median_us for r in rs if r.status == "ok" and r.median_us > 0]
    best, slowest = min(ok), max(ok)
    times = [r.median_us if r.status == "ok" and r.median_us > 0 else slowest for r in rs]
    return times, best, next(i for i, r in enumerate(rs) if r.config.template == "aten")


def evaluate(models: list, problems: list, margins: list[float]) -> dict:
    """{label: {"top1@m": (geomean, p90), "top5": (geomean, p90)}} for every model and the ensemble."""
    import numpy as np
    from torch_diode.hook.ranking import Options, Ranker
    rankers = [(label, Ranker(m)) for label, m in models]
    per: dict = {label: [] for label, _ in rankers}
    per["ensemble (mean log time)"] = []
    for p, rs in problems:
        times, best, aten = candidate_times(rs)
        configs = [r.config for r in rs]
        all_scores = []
        for label, rk in rankers:
            s = np.asarray(rk.rank(p, configs, Options()).scores, dtype=np.float64)
            all_scores.append(s)
            per[label].append(regrets(s, times, best, aten, margins))
        per["ensemble (mean log time)"].append(regrets(np.mean(all_scores, axis=0), times, best, aten, margins))
    out = {}
    for label, rows in per.items():
        out[label] = {f"top1@{m:g}": (geomean([r[m] for r in rows]), p90([r[m] for r in rows])) for m in margins}
        out[label]["top5"] = (geomean([r["top5"] for r in rows]), p90([r["top5"] for r in rows]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", required=True, help="model directory; repeat (two or more for the ensemble)")
    ap.add_argument("--data", required=True, help="dataset directory")
    ap.add_argument("--split-list", required=True, help="`diode validate --list-split SPLIT --json` output")
    ap.add_argument("--margins", default="0,0.01,0.02,0.05", help="comma-separated ATen margins (default 0,0.01,0.02,0.05)")
    ap.add_argument("--json", default="", help="write the figures here")
    a = ap.parse_args(argv)
    try:
        margins = sorted({float(x) for x in a.margins.split(",")})
    except ValueError:
        ap.error(f"--margins {a.margins!r}: comma-separated numbers expected")
    if any(m < 0 for m in margins) or 0.0 not in margins:
        ap.error("--margins: non-negative, and 0 (validate's top-1) among them")
    from torch_diode.model import load_model_dir
    models = [(os.path.basename(os.path.normpath(m)) or m, load_model_dir(m)) for m in a.model]
    problems = list(problems_of([a.data], read_split_list(a.split_list), keep_failed=True))
    if not problems:
        ap.error(f"no problem of {a.split_list} in {a.data}")
    res = evaluate(models, problems, margins)
    cols = [f"top1@{m:g}" for m in margins] + ["top5"]
    print(f"{len(problems)} problems of {a.split_list}; regret geomean / p90 against the best of everything measured")
    print("| model | " + " | ".join(c.replace("top1@", "top-1, ATen margin ") if c != "top5" else "top-5" for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for label, figs in res.items():
        print(f"| {label} | " + " | ".join(f"{figs[c][0]:.4f} / {figs[c][1]:.3f}" for c in cols) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"problems": len(problems), "split_list": a.split_list, "results": res}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
