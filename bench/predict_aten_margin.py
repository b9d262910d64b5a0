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
problem count are printed), e.g. the trainer's test split: `--split-list LIST` keeps only the
problems of a `diode validate --dataset DIR --list-split test --json > LIST` file (matched by
shape, op, dtypes, layout and bias). Per op and dtype, the hook's default margin (`--margin`,
default torch_diode.hook.ranking.DEFAULT_ATEN_MARGIN: predict mode as shipped) is printed next
to cuBLAS alone, the question a release asks: would predict mode slow any op?

    build/cli/diode validate --dataset datasets/nvidia-h200-144gb --list-split test --json > test.json
    .venv/bin/python bench/predict_aten_margin.py --model MODEL --split-list test.json datasets/nvidia-h200-144gb

    .venv/bin/python bench/predict_aten_margin.py --model python/torch_diode/bundles/nvidia-h100-80gb/2 \
        datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p0*.msgpack.gz ...
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import sys

from torch_diode.aten_margin import (  # noqa: F401  (one definition, re-exported for the bench scripts' callers)
    DEFAULT_FLAG, MARGINS, RULES, disturbed, margin_row, member_gaps, predict_picks_triton, predict_time,
    problem_key, problems_of, read_split_list, replay_rows, stats)
from torch_diode.hook.ranking import DEFAULT_ATEN_MARGIN
from torch_diode.model import load_model_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (model.json + weights)")
    ap.add_argument("--json", default="", help="write the table as JSON here")
    ap.add_argument("--per-problem", action="store_true", help="list each problem (at --margin)")
    ap.add_argument("--margin", type=float, default=DEFAULT_ATEN_MARGIN, metavar="M",
                    help="the margin of the per-op/dtype table and --per-problem (default: the hook's "
                         f"aten_margin, {DEFAULT_ATEN_MARGIN})")
    ap.add_argument("--split-list", default="", metavar="LIST",
                    help="only the problems of this `diode validate --list-split SPLIT --json` file")
    ap.add_argument("--max-spread", type=float, default=0.0, metavar="F",
                    help="> 0: replay as if every ok record whose spread (IQR) exceeds F x its median had "
                         "never been timed, as `diode validate --max-spread F` scores (0, the default: "
                         "the data as measured)")
    ap.add_argument("datasets", nargs="+", help="dataset files or directories")
    a = ap.parse_args(argv)
    model = load_model_dir(a.model)
    trained = model.info.meta.get("dataset", {})
    keep = read_split_list(a.split_list) if a.split_list else None
    if not (math.isfinite(a.margin) and a.margin >= 0):
        raise SystemExit(f"--margin {a.margin}: must be a finite number >= 0")
    if not 0 <= a.max_spread <= 1000:
        raise SystemExit(f"--max-spread {a.max_spread}: must be within [0, 1000] (diode validate's range)")
    rows = replay_rows(model, a.datasets, keep, a.max_spread)
    if not rows:
        print("no problem with an aten record and DEFAULT-flagged configs")
        return 1
    outside = sum(not r["inside"] for r in rows)
    print(f"{len(rows)} problems ({outside} outside the model's training domain: ATen, as the hook does); "
          f"model {a.model} (trained on {trained.get('problems', '?')} problems)"
          + (f"; records with spread > {a.max_spread:g} x median left out" if a.max_spread > 0 else ""))
    table = []
    print("| margin | regret vs best: geomean / p90 / max | vs cuBLAS: geomean / max | ATen chosen |")
    print("|---|---|---|---|")
    for m in MARGINS + (math.inf,):
        row = margin_row(rows, m)
        label = "cuBLAS only" if m == math.inf else f"{m:.2f}"
        print(f"| {label} | {row['regret_geomean']:.3f} / {row['regret_p90']:.3f} / {row['regret_max']:.3f} | "
              f"{row['vs_cublas_geomean']:.3f} / {row['vs_cublas_max']:.3f} | {row['aten_chosen']}/{len(rows)} |")
        table.append(row)
    g, p90, mx = stats([r["default_best"] / r["best"] for r in rows])
    print(f"| (best of DEFAULT list + ATen, measured) | {g:.3f} / {p90:.3f} / {mx:.3f} | | |")
    # Per op and dtype at --margin (predict mode as the hook runs it) against cuBLAS alone.
    groups = collections.defaultdict(list)
    for r in rows:
        groups["op " + r["problem"].op].append(r)
        groups["dtype " + r["problem"].dtype_a].append(r)
    per_group = {}
    print(f"\n| group (margin {a.margin:g}) | problems | predict regret geomean | cuBLAS alone regret geomean | predict / cuBLAS geomean, max |")
    print("|---|---|---|---|---|")
    for name in sorted(groups):
        rs = groups[name]
        pick = [predict_time(r, a.margin) for r in rs]
        g_pred = stats([t / r["best"] for t, r in zip(pick, rs)])[0]
        g_cub = stats([r["aten"] / r["best"] for r in rs])[0]
        g_vs, _, mx_vs = stats([t / r["aten"] for t, r in zip(pick, rs)])
        per_group[name] = {"problems": len(rs), "predict_regret_geomean": g_pred,
                           "cublas_regret_geomean": g_cub, "predict_vs_cublas_geomean": g_vs,
                           "predict_vs_cublas_max": mx_vs}
        print(f"| {name} | {len(rs)} | {g_pred:.3f} | {g_cub:.3f} | {g_vs:.3f}, {mx_vs:.3f} |")
    if a.per_problem:
        for r in sorted(rows, key=lambda r: r["triton"] / r["aten"]):
            p = r["problem"]
            gap = f"{math.expm1(r['gap']):+.3f}" if r["inside"] else "(outside domain)"
            print(f"{p.op} {p.batch}x{p.m}x{p.n}x{p.k} {p.dtype_a} tb={int(p.trans_b)}: predicted gap "
                  f"{gap}, triton/aten measured {r['triton'] / r['aten']:.3f}, "
                  f"predict picks {'triton' if predict_picks_triton(r, a.margin) else 'aten'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"problems": len(rows), "model": a.model, "max_spread": a.max_spread, "table": table,
                       "group_margin": a.margin, "per_group": per_group}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
