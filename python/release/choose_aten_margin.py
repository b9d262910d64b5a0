"""Choose a model's ATen margin on its validation split and write it into its model.json.

    build/cli/diode validate --dataset datasets/KEY --list-split validation --json > val.json
    .venv/bin/python python/release/choose_aten_margin.py --model DIR --dataset datasets/KEY \
        --split-list val.json [--bound 1.10] [--max-spread 0.5]

The release's step between the gate and `diode publish` (python/release/release_bundles.sh),
so that the margin is signed with the model it was chosen for. Predict mode hands a Triton
config over instead of cuBLAS only when the model predicts it faster by more than the margin;
how far a confidently wrong Triton pick can miss differs from model to model (an H200
candidate's worst validation GEMM read 1.196x cuBLAS at the margin 0.05 that suited version 5;
docs/decisions/010), so one global default either costs the safe models speed or lets an
unsafe one through.

The choice is bench/aten_margin_choice.py's rule on this one model (one definition:
torch_diode/aten_margin.py's `choose` on its replay, `replay_rows`): the smallest margin of the grid whose
worst validation GEMM is within `--bound` x cuBLAS alone (default 1.10, issue 20's bound).
With `--rule every_member` the replay asks every ensemble member alone to predict the Triton
pick faster by the margin (the hook's aten_rule "every_member"), and the margin is chosen for
that rule. It is written as model.json's `selection` object (docs/model-format.md):
`{"aten_margin": M, "aten_rule": R, "bound": B, "split": "validation", "problems": N,
  "vs_cublas_geomean": G, "vs_cublas_max": W}`; the hook's predict mode uses `aten_margin`
unless the user sets one (docs/hook.md). Exit 1 with nothing written when no margin of the
grid meets the bound: such a model is not fit for predict mode and is not published.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from torch_diode.aten_margin import (MARGINS, RULES, check_bound_and_spread, choose, margin_row, read_split_list,
                                    replay_rows)
from torch_diode.model import MAX_ATEN_MARGIN, load_model_dir


def selection_for(model_dir: str, dataset: str, split_list: str, bound: float, max_spread: float,
                  rule: str = "mean") -> dict | None:
    """model.json's `selection` for this model under predict mode's ATen `rule` (RULES), or
    None when no margin of the grid keeps its worst validation GEMM within `bound` x cuBLAS."""
    rows = replay_rows(load_model_dir(model_dir), [dataset], read_split_list(split_list), max_spread,
                       members=rule == "every_member")
    if not rows:
        raise SystemExit(f"choose_aten_margin: no problem of {split_list} in {dataset} with an aten record "
                         "and DEFAULT-flagged configs")
    table = [margin_row(rows, m, rule) for m in MARGINS]
    for r in table:
        print(f"margin {r['margin']:.2f}: x cuBLAS geomean {r['vs_cublas_geomean']:.3f}, worst "
              f"{r['vs_cublas_max']:.3f}; ATen chosen {r['aten_chosen']}/{len(rows)}")
    chosen = choose({"model": table}, bound)
    if chosen is None:
        return None
    assert 0 <= chosen <= MAX_ATEN_MARGIN  # the grid lies within what model.json accepts
    row = table[MARGINS.index(chosen)]
    return {"aten_margin": chosen, "aten_rule": rule, "bound": bound, "split": "validation", "problems": len(rows),
            "vs_cublas_geomean": round(row["vs_cublas_geomean"], 6),
            "vs_cublas_max": round(row["vs_cublas_max"], 6)}


def write_selection(model_dir: str, selection: dict) -> None:
    """Sets model.json's `selection` (sorted keys, 2-space indent, as the trainer writes it),
    atomically: a crash leaves the old file or the new one, never half of one."""
    path = os.path.join(model_dir, "model.json")
    with open(path, "rb") as f:
        j = json.loads(f.read())
    j["selection"] = selection
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(j, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    load_model_dir(model_dir)  # the written file reads back as a valid model


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (model.json + weights.msgpack): written")
    ap.add_argument("--dataset", required=True, help="the model's dataset (file or directory)")
    ap.add_argument("--split-list", required=True, metavar="LIST",
                    help="`diode validate --list-split validation --json` output: never the test split")
    ap.add_argument("--bound", type=float, default=1.10, help="worst GEMM allowed, x cuBLAS alone (default 1.10)")
    ap.add_argument("--max-spread", type=float, default=0.5, metavar="F",
                    help="leave out records whose IQR exceeds F x their median (default 0.5, the trainer's)")
    ap.add_argument("--rule", choices=RULES, default="mean",
                    help="predict mode's ATen rule the margin is chosen for and written with "
                         "(selection.aten_rule): mean (the ensemble's score, the default) or every_member "
                         "(each member alone; bench/predict_member_agreement.py (script removed; git history))")
    a = ap.parse_args(argv)
    check_bound_and_spread(a)
    sel = selection_for(a.model, a.dataset, a.split_list, a.bound, a.max_spread, a.rule)
    if sel is None:
        print(f"choose_aten_margin: no margin of {MARGINS} keeps the worst validation GEMM within "
              f"{a.bound:g}x cuBLAS; model.json not changed", file=sys.stderr)
        return 1
    write_selection(a.model, sel)
    print(f"aten_margin {sel['aten_margin']:g} ({sel['aten_rule']} rule): worst validation GEMM {sel['vs_cublas_max']:.3f}x cuBLAS "
          f"(bound {a.bound:g}), geomean {sel['vs_cublas_geomean']:.3f}x over {sel['problems']} problems; "
          f"written to {os.path.join(a.model, 'model.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
