#!/usr/bin/env python3
"""Predict mode's ATen decision when an ensemble's members must agree: a CPU replay.

    build/cli/diode validate --dataset datasets/nvidia-h200-144gb --list-split validation --json > val.json
    .venv/bin/python bench/predict_member_agreement.py \
        --case "H200 v8 val" python/torch_diode/bundles/nvidia-h200-144gb/8 datasets/nvidia-h200-144gb val.json

Predict mode hands over its best-scored Triton config instead of cuBLAS when the model
predicts that config faster by more than the ATen margin (bench/predict_aten_margin.py). An
ensemble's score is its members' mean, so one member that is confidently wrong can carry a
pick the others doubt. The worst GEMMs of the H200 replays (docs/training.md, candidate 10)
are such picks: K = 64 attention-score bmm predicted 1-6% faster than cuBLAS, 10-20% slower.

Per case and margin of predict_aten_margin's grid, side by side, the time of predict mode's
choice against cuBLAS alone (geomean / worst GEMM, and how many Triton picks) by two rules:
`mean` (the hook today: the ensemble's score) and `every_member` (Triton only when every
member alone predicts it faster by more than the margin; for a single model the two are the
same). Then, per rule, the margin `choose_aten_margin.py`'s rule would take on that case (the
smallest whose worst GEMM is within --bound x cuBLAS). Choose on the validation split; a
test split is for information only.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from aten_margin_choice import case_arguments, check_case_arguments, choose  # noqa: E402
from predict_aten_margin import MARGINS, RULES, margin_row, read_split_list, replay_rows  # noqa: E402
from torch_diode.model import load_model_dir  # noqa: E402


def case_tables(rows: list[dict]) -> dict[str, list[dict]]:
    """rule -> margin_row per margin of the grid, over one case's replay rows (members=True)."""
    return {rule: [margin_row(rows, m, rule) for m in MARGINS] for rule in RULES}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    case_arguments(ap)
    a = ap.parse_args(argv)
    check_case_arguments(a)
    out = {}
    for label, model_dir, dataset, split_list in a.case:
        model = load_model_dir(model_dir)
        rows = replay_rows(model, [dataset], read_split_list(split_list), a.max_spread, members=True)
        if not rows:
            raise SystemExit(f"{label}: no problem of {split_list} in {dataset} with an aten record and "
                             "DEFAULT-flagged configs")
        tables = case_tables(rows)
        members = 1 + len(model.others)
        print(f"\n{label}: {len(rows)} problems, {members} member(s); predict's choice x cuBLAS alone, "
              "geomean / worst GEMM (Triton picks)")
        print("| margin | " + " | ".join(RULES) + " |")
        print("|---|" + "---|" * len(RULES))
        for i, m in enumerate(MARGINS):
            cells = [f"{t[i]['vs_cublas_geomean']:.3f} / {t[i]['vs_cublas_max']:.3f} ({len(rows) - t[i]['aten_chosen']})"
                     for t in (tables[r] for r in RULES)]
            print(f"| {m:.2f} | " + " | ".join(cells) + " |")
        chosen = {}
        for rule in RULES:
            c = choose({label: tables[rule]}, a.bound)
            chosen[rule] = c
            if c is None:
                print(f"{rule}: no margin keeps the worst GEMM within {a.bound:g}x cuBLAS")
            else:
                r = tables[rule][MARGINS.index(c)]
                print(f"{rule}: margin {c:g} (worst {r['vs_cublas_max']:.3f}x, geomean {r['vs_cublas_geomean']:.3f}x)")
        out[label] = {"problems": len(rows), "members": members, "tables": tables, "chosen": chosen}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bound": a.bound, "max_spread": a.max_spread, "cases": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
