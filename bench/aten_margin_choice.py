"""Choose predict mode's ATen margin (the hook's `aten_margin`) on several models at once.

    build/cli/diode validate --dataset datasets/nvidia-h100-80gb --list-split validation --json > h100-val.json
    build/cli/diode validate --dataset datasets/nvidia-h200-144gb --list-split validation --json > h200-val.json
    .venv/bin/python bench/aten_margin_choice.py \
        --case "H100 v5" python/torch_diode/bundles/nvidia-h100-80gb/5 datasets/nvidia-h100-80gb h100-val.json \
        --case "H200 v1" python/torch_diode/bundles/nvidia-h200-144gb/1 datasets/nvidia-h200-144gb h200-val.json

Each `--case LABEL MODEL DATASET SPLIT_LIST` replays predict mode's decision (its best-scored
DEFAULT-list Triton config, or ATen unless that config is predicted faster by more than the
margin) on the problems of a `diode validate --list-split SPLIT --json` file, with
torch_diode/aten_margin.py's replay (one definition: `replay_rows`, `margin_row`, `choose`). Use the
validation split: the margin is a decision of the release, and the test split must stay
unseen. Side by side, per margin of predict_aten_margin's grid, the time of predict mode's
choice against cuBLAS alone (geomean / worst GEMM) for every case; then the choice: the
smallest margin at which every case's worst GEMM is within `--bound` x cuBLAS (default 1.10,
issue 20's bound), with what it costs each case in geomean against margin 0.
"""
from __future__ import annotations

import argparse
import json
import sys

from torch_diode.aten_margin import (  # noqa: F401  (one definition: torch_diode/aten_margin.py)
    MARGINS, check_bound_and_spread, choose, margin_row, read_split_list, replay_rows)
from torch_diode.model import load_model_dir


def case_arguments(ap: argparse.ArgumentParser) -> None:
    """--case (repeatable), --max-spread, --bound and --json: the arguments of every replay
    over models and their split lists (this script, bench/predict_member_agreement.py (script removed; git history))."""
    ap.add_argument("--case", nargs=4, action="append", required=True,
                    metavar=("LABEL", "MODEL", "DATASET", "SPLIT_LIST"),
                    help="a model, its dataset and the split's problem list (repeatable)")
    ap.add_argument("--max-spread", type=float, default=0.5, metavar="F",
                    help="leave out records whose IQR exceeds F x their median, as the trainer and "
                         "`diode validate --max-spread` do (default 0.5, the trainer's default; 0: off)")
    ap.add_argument("--bound", type=float, default=1.10,
                    help="worst GEMM allowed, x cuBLAS alone (default 1.10)")
    ap.add_argument("--json", default="", help="write the tables and the choice here")


def check_case_arguments(a: argparse.Namespace) -> None:
    check_bound_and_spread(a)
    labels = [c[0] for c in a.case]
    if len(set(labels)) != len(labels):
        raise SystemExit("--case labels must differ")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    case_arguments(ap)
    a = ap.parse_args(argv)
    check_case_arguments(a)
    labels = [c[0] for c in a.case]
    tables, problems = {}, {}
    for label, model_dir, dataset, split_list in a.case:
        rows = replay_rows(load_model_dir(model_dir), [dataset], read_split_list(split_list), a.max_spread)
        if not rows:
            raise SystemExit(f"{label}: no problem of {split_list} in {dataset} with an aten record and "
                             "DEFAULT-flagged configs")
        tables[label] = [margin_row(rows, m) for m in MARGINS]
        problems[label] = len(rows)
    print("predict mode's choice x cuBLAS alone, geomean / worst GEMM ("
          + ", ".join(f"{k}: {n} problems" for k, n in problems.items()) + ")")
    print("| margin | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for i, m in enumerate(MARGINS):
        cells = [f"{tables[k][i]['vs_cublas_geomean']:.3f} / {tables[k][i]['vs_cublas_max']:.3f}" for k in labels]
        print(f"| {m:.2f} | " + " | ".join(cells) + " |")
    chosen = choose(tables, a.bound)
    if chosen is None:
        print(f"no margin of the grid keeps every case's worst GEMM within {a.bound:g}x cuBLAS")
    else:
        i = MARGINS.index(chosen)
        cost = {k: tables[k][i]["vs_cublas_geomean"] / tables[k][0]["vs_cublas_geomean"] for k in labels}
        print(f"chosen margin {chosen:g}: the smallest with every worst GEMM within {a.bound:g}x cuBLAS; "
              "geomean against margin 0: " + ", ".join(f"{k} {c:.3f}x" for k, c in cost.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bound": a.bound, "max_spread": a.max_spread, "problems": problems,
                       "tables": tables, "chosen": chosen}, f, indent=1)
    return 0 if chosen is not None else 1


if __name__ == "__main__":
    sys.exit(main())
