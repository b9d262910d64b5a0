"""Would a constant bias on the ATen configs' predicted log time pick better? (issue 19)

The model's top-1 ranks ATen (cuBLAS) and Triton configs by one predicted log time. This
replays that top-1 with ATen's scores moved by -ln(1 + d) for each bias d (d > 0 favours
cuBLAS, d < 0 Triton) and prints the top-1 regret geomean against the best of every record,
overall, per op and per dtype, next to the best of Inductor's DEFAULT list + ATen (the
baseline `diode validate` reports). Problems are grouped as `diode validate` groups them
(bench/predict_aten_margin.problems_of). Session 22 on H200 version 4 (docs/training.md):

    build/cli/diode validate --dataset datasets/nvidia-h200-144gb --list-split validation --json > val.json
    PYTHONPATH=python python bench/aten_score_bias.py --model MODEL --split-list val.json datasets/nvidia-h200-144gb \\
        --bias 0,0.01,0.02,0.03,0.05,0.08,0.1,-0.01,-0.02,-0.03,-0.05
"""
from __future__ import annotations

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)

from predict_aten_margin import problems_of, read_split_list  # noqa: E402
from stats import geomean  # noqa: E402
from torch_diode.collect.engine import FLAG_DEFAULT  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker, config_key  # noqa: E402
from torch_diode.model import load_model_dir  # noqa: E402


def biased_pick(scores, recs, bias: float) -> int:
    """Index of the lowest score once every ATen record's score is lowered by ln(1 + bias)
    (ties to the first, as validate)."""
    shift = math.log1p(bias)
    return min(range(len(recs)), key=lambda j: (scores[j] - (shift if not recs[j].config.is_triton else 0.0), j))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="+", help="dataset files or directories")
    ap.add_argument("--model", required=True, help="model or bundle directory")
    ap.add_argument("--split-list", required=True, help="`diode validate --list-split SPLIT --json` output")
    ap.add_argument("--bias", default="0,0.02,0.05,-0.02", help="comma-separated biases d (> -1)")
    a = ap.parse_args(argv)
    biases = [float(x) for x in a.bias.split(",")]
    if any(d <= -1 for d in biases):
        ap.error("--bias: every d must be > -1")
    ranker = Ranker(load_model_dir(a.model))
    base: dict[str, list[float]] = {}
    picked = {d: {} for d in biases}
    for p, recs in problems_of(a.datasets, read_split_list(a.split_list)):
        r = ranker.rank_keys(p, [config_key(x.config) for x in recs], Options(top_k=1, threshold=0.0))
        best = min(x.median_us for x in recs)
        dflt = min(x.median_us for x in recs if (x.flags & FLAG_DEFAULT) or not x.config.is_triton)
        for g in ("all", p.op, p.dtype_a):
            base.setdefault(g, []).append(dflt / best)
            for d in biases:
                picked[d].setdefault(g, []).append(recs[biased_pick(r.scores, recs, d)].median_us / best)
    if not base:
        print("aten_score_bias: no problem with an ATen record and a DEFAULT config", file=sys.stderr)
        return 1
    groups = list(base)
    print(f"{len(base['all'])} problems; top-1 regret geomean (DEFAULT + ATen: the measured baseline)")
    print("| bias | " + " | ".join(groups) + " |")
    print("|---|" + "---|" * len(groups))
    print("| DEFAULT + ATen | " + " | ".join(f"{geomean(base[g]):.4f}" for g in groups) + " |")
    for d in biases:
        print(f"| {d:+.2f} | " + " | ".join(f"{geomean(picked[d][g]):.4f}" for g in groups) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
