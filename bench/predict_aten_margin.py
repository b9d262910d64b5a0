#!/usr/bin/env python3
"""How much predicted advantage a Triton config needs before predict mode prefers it to cuBLAS.

Predict mode (docs/hook.md, Modes) ranks what Inductor offers under max_autotune_gemm (the
DEFAULT list of Triton configs) together with the op's ATen kernel, and hands over the one
with the lowest predicted time. A model error on a Triton config costs up to 2x (H100 run
of 2026-11-25: M = 1 decode GEMMs, outside the training data's M range), while cuBLAS is
rarely far from the best. This replays that decision on measured problems with a margin:
the best-scored Triton config is chosen only if its predicted time times (1 + margin) is
below ATen's predicted time; outside the model's training sizes (model.json dataset.domain)
ATen is chosen, as the hook does. Per margin it prints the regret of the choice against the best
of everything measured (EXHAUSTIVE Triton and ATen), against cuBLAS alone, and how often
ATen is chosen. Use problems the model was not trained on (the model's dataset hash and
problem count are printed).

    .venv/bin/python bench/predict_aten_margin.py --model python/torch_diode/bundles/nvidia-h100-80gb/2 \
        datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p0*.msgpack.gz ...
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

from torch_diode.collect.engine import FLAG_DEFAULT as DEFAULT_FLAG  # noqa: E402  (in Inductor's DEFAULT list)
from torch_diode.dataset import load_dataset  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker  # noqa: E402
from torch_diode.model import load_model_dir  # noqa: E402
MARGINS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)


def problems_of(paths):
    """(problem, ok records of it) for every problem with an `aten` record and a DEFAULT Triton config."""
    for path in paths:
        for shard in load_dataset(path).shards:
            recs = collections.defaultdict(list)
            for r in shard.records:
                if r.status == "ok" and r.median_us > 0:
                    recs[r.problem_index].append(r)
            for i, rs in sorted(recs.items()):
                if any(r.config.template == "aten" for r in rs) and any(r.config.is_triton and r.flags & DEFAULT_FLAG for r in rs):
                    yield shard.problems[i], rs


def stats(xs):
    s = sorted(xs)
    g = math.exp(sum(math.log(x) for x in s) / len(s))
    return g, s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))], s[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (model.json + weights)")
    ap.add_argument("--json", default="", help="write the table as JSON here")
    ap.add_argument("--per-problem", action="store_true", help="list each problem at margin 0")
    ap.add_argument("datasets", nargs="+", help="dataset files or directories")
    a = ap.parse_args(argv)
    model = load_model_dir(a.model)
    ranker = Ranker(model)
    trained = model.info.meta.get("dataset", {})
    rows = []  # per problem: (problem, best, aten, [(triton score gap, triton time)], best-scored choice)
    for p, rs in problems_of(a.datasets):
        cands = [r for r in rs if r.config.is_triton and r.flags & DEFAULT_FLAG]
        aten = next(r for r in rs if r.config.template == "aten")
        offered = cands + [aten]
        scores = ranker.rank(p, [r.config for r in offered], Options()).scores
        t = min(range(len(cands)), key=lambda j: scores[j])
        # outside the model's training sizes the hook hands over ATen (model.json dataset.domain)
        inside = model.info.in_domain(p.batch, p.m, p.n, p.k)
        rows.append({"problem": p, "best": min(r.median_us for r in rs), "aten": aten.median_us,
                     "triton": cands[t].median_us, "gap": float(scores[-1] - scores[t]) if inside else -math.inf,
                     "inside": inside, "default_best": min(r.median_us for r in offered)})
    if not rows:
        print("no problem with an aten record and DEFAULT-flagged configs")
        return 1
    outside = sum(not r["inside"] for r in rows)
    print(f"{len(rows)} problems ({outside} outside the model's training domain: ATen, as the hook does); "
          f"model {a.model} (trained on {trained.get('problems', '?')} problems)")
    table = []
    print("| margin | regret vs best: geomean / p90 / max | vs cuBLAS: geomean / max | ATen chosen |")
    print("|---|---|---|---|")
    for m in MARGINS + (math.inf,):
        reg, vs_cublas, n_aten = [], [], 0
        for r in rows:
            use_triton = r["gap"] > math.log1p(m) if m != math.inf else False
            t = r["triton"] if use_triton else r["aten"]
            n_aten += not use_triton
            reg.append(t / r["best"])
            vs_cublas.append(t / r["aten"])
        g, p90, mx = stats(reg)
        gc, _, mxc = stats(vs_cublas)
        label = "cuBLAS only" if m == math.inf else f"{m:.2f}"
        print(f"| {label} | {g:.3f} / {p90:.3f} / {mx:.3f} | {gc:.3f} / {mxc:.3f} | {n_aten}/{len(rows)} |")
        table.append({"margin": None if m == math.inf else m, "regret_geomean": g, "regret_p90": p90,
                      "regret_max": mx, "vs_cublas_geomean": gc, "vs_cublas_max": mxc, "aten_chosen": n_aten})
    g, p90, mx = stats([r["default_best"] / r["best"] for r in rows])
    print(f"| (best of DEFAULT list + ATen, measured) | {g:.3f} / {p90:.3f} / {mx:.3f} | | |")
    if a.per_problem:
        for r in sorted(rows, key=lambda r: r["triton"] / r["aten"]):
            p = r["problem"]
            gap = f"{math.expm1(r['gap']):+.3f}" if r["inside"] else "(outside domain)"
            print(f"{p.op} {p.batch}x{p.m}x{p.n}x{p.k} {p.dtype_a} tb={int(p.trans_b)}: predicted gap "
                  f"{gap}, triton/aten measured {r['triton'] / r['aten']:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"problems": len(rows), "model": a.model, "table": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
