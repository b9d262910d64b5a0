#!/usr/bin/env python3
"""Where a model's top-1 regret comes from: the per-problem regret of `diode validate`'s top-1
(the lowest-scored candidate's time / the problem's best, margin 0), grouped by op, dtype,
M, N and K buckets, and by whether the best record is cuBLAS (issue 19; what to collect next).

    build/cli/diode validate --dataset datasets/nvidia-h200-144gb --list-split test --json > test.json
    PYTHONPATH=python .venv/bin/python bench/regret_breakdown.py --model MODEL --data datasets/nvidia-h200-144gb \\
        --split-list test.json [--json out.json]

Per group: problems, the geomean regret, and the group's share of the split's summed log
regret (where the points of the headline figure sit). Candidates, records and a failed pick
as in bench/top1_variants.py (predict_aten_margin.problems_of: validate's grouping).
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
from stats import geomean  # noqa: E402
from top1_variants import candidate_times, regrets  # noqa: E402  (validate's top-1 of one problem)

BOUNDS = {"m": (1, 16, 256, 2048), "n": (64, 512, 4096), "k": (64, 512, 4096)}


def bucket(dim: str, v: int) -> str:
    """A dimension's bucket label: '<=b' for the first bound it does not pass, else '>last'."""
    for b in BOUNDS[dim]:
        if v <= b:
            return f"{dim}<={b}"
    return f"{dim}>{BOUNDS[dim][-1]}"


def groups_of(p, best_is_aten: bool) -> dict[str, str]:
    return {"op": p.op, "bias": f"bias {p.bias}", "dtype": p.dtype_a, "m": bucket("m", p.m), "n": bucket("n", p.n),
            "k": bucket("k", p.k), "best": "cuBLAS fastest" if best_is_aten else "Triton fastest"}


def breakdown(rows: list[tuple[dict, float]]) -> dict:
    """{axis: {group: {problems, top1, share}}} from (groups, regret) rows."""
    total = sum(math.log(r) for _, r in rows) or 1.0
    out: dict = {}
    for axis in rows[0][0]:
        by: dict = {}
        for g, r in rows:
            by.setdefault(g[axis], []).append(r)
        out[axis] = {k: {"problems": len(v), "top1": geomean(v), "share": sum(map(math.log, v)) / total}
                     for k, v in sorted(by.items(), key=lambda kv: -sum(map(math.log, kv[1])))}
    return out


def evaluate(model, problems) -> list[tuple[dict, float]]:
    import numpy as np
    from torch_diode.hook.ranking import Options, Ranker
    rk = Ranker(model)
    rows = []
    for p, rs in problems:
        times, best, aten = candidate_times(rs)
        s = np.asarray(rk.rank(p, [r.config for r in rs], Options()).scores, dtype=np.float64)
        rows.append((groups_of(p, times[aten] == best), regrets(s, times, best, aten, [0.0])[0.0]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model or bundle directory")
    ap.add_argument("--data", required=True, help="dataset directory")
    ap.add_argument("--split-list", required=True, help="`diode validate --list-split SPLIT --json` output")
    ap.add_argument("--json", default="", help="write the breakdown here")
    a = ap.parse_args(argv)
    from torch_diode.model import load_model_dir
    problems = list(problems_of([a.data], read_split_list(a.split_list), keep_failed=True))
    if not problems:
        ap.error(f"no problem of {a.split_list} in {a.data}")
    rows = evaluate(load_model_dir(a.model), problems)
    res = {"problems": len(rows), "top1": geomean([r for _, r in rows]), "groups": breakdown(rows)}
    print(f"{res['problems']} problems, top-1 {res['top1']:.4f} (validate's, margin 0)")
    for axis, groups in res["groups"].items():
        print(f"\n| {axis} | problems | top-1 | share of the log regret |\n|---|---|---|---|")
        for k, g in groups.items():
            print(f"| {k} | {g['problems']} | {g['top1']:.4f} | {100 * g['share']:.1f}% |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
