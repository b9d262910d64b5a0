#!/usr/bin/env python3
"""A seed ensemble of diode models as a rankings baseline: mean predicted log time.

    python bench/ensemble_rankings.py --dataset datasets/nvidia-h100-80gb --split validation \
        --models /tmp/v5/seed-1 /tmp/v5/seed-2 ... [--name ensemble5] [--k 1] \
        [--diode build/cli/diode] [--out ens.json]
    diode validate --model /tmp/v5/seed-1 --dataset datasets/nvidia-h100-80gb --split validation \
        --baseline-rankings ens.json [--json]

The question it answers: models trained with different seeds on the same data
disagree on single picks; would averaging their scores pick better? The judge is
`diode validate` itself: this script writes a rankings file (models/src/metrics.h
`Rankings`, the format bench/torch_diode_011_eval.py writes) and `--baseline-rankings`
scores it on the same problems, configs and denominators as the model it is run with.

The problems and their configs come from `diode validate --list-split SPLIT --json`
(the C++ grouping and split: the problems, configs, config order and measured times
`diode validate` judges), never from a copy of the split logic.

Scores, per model: the hook's own ranker, python/torch_diode/hook/ranking.py
`Ranker.score(problem, configs)` on a model loaded with torch_diode.model.load_model_dir:
features.raw_features of every config (bit-identical, tested in
tests/python/test_hook_rank_fast.py), standardised by the model's feature_spec
(`_standardisation`: a zero stddev divides by 1), one forward of the residual MLP:
the model's predicted log(us), float32. Every config of the problem is scored, ATen
and every template included (the model is trained on the ATen record and ranks it
itself, as `diode validate`'s "model" view does), whatever the model's training
domain (dataset.domain): `diode validate` scores every problem of the split with the
model too, so the hook's out-of-domain refusal (docs/hook.md) is not applied here.

Ensemble score of a config = arithmetic mean over the models of their predicted log
time (i.e. the log of the geometric mean of the predicted times), computed in float64
from the float32 predictions. The rankings file stores it as a JSON double; `diode
validate` reads it as a float (Rankings::from_json), so two configs whose means agree
to float32 precision tie, and a tie goes to config order (rankings_regret's stable sort),
as the model's own ranking does. With one model the mean is that model's float32
prediction exactly.

Rankings file: every config gets a score (no nulls), "with_aten" false (ATen is a
candidate the models rank, not an extra benchmark), "k" = --k (default 1: the
baseline's regret is the ensemble's top-1 pick against the best of everything
measured, the same ratio as "model" -> "top1"; --k 5 gives the top-5 view), ops: all
four. Sanity check (tests/python/test_ensemble_rankings.py): with one model the
baseline's geomean equals that model's own "model" -> "top1" geomean of `diode
validate --model SAME --json`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))

import torch  # noqa: E402

from torch_diode.hook.ranking import Ranker  # noqa: E402
from torch_diode.model import cascade_scores, is_aten_template, load_model_dir  # noqa: E402
from torch_diode import wire  # noqa: E402
from torch_diode_011_eval import list_split  # noqa: E402  (bench/, the same listing)

OPS = ["mm", "addmm", "bmm", "baddbmm"]
PROBLEM_FIELDS = tuple(f.name for f in dataclasses.fields(wire.Problem))


def to_problem(p: dict) -> wire.Problem:
    """A listed problem (its configs and times beside it) as a wire.Problem."""
    return wire.problem_from_json({f: p[f] for f in PROBLEM_FIELDS})


def model_scores(rankers: list[Ranker], p: dict) -> np.ndarray:
    """[models, configs] predicted log(us) of every config of p, one row per model (float64 of float32)."""
    prob = to_problem(p)
    cfgs = [wire.config_from_json(c) for c in p["configs"]]
    return np.asarray([r.score(prob, cfgs)[0] for r in rankers], dtype=np.float64).reshape(len(rankers), len(cfgs))


def ensemble_scores(scores: np.ndarray, templates: list[str], cascade: int) -> np.ndarray:
    """[models, configs] predictions -> one score per config. cascade 0: the mean of every
    model's predicted log time (float64). cascade K > 0: the shipped format's cascade
    (torch_diode.model.cascade_scores, docs/model-format.md, Members: the first model scores
    every config, the others its K best and the ATen configs), float32 as the hook scores."""
    if cascade <= 0:
        return scores.mean(axis=0)
    aten = np.fromiter((is_aten_template(t) for t in templates), dtype=bool, count=len(templates))
    # the rows are float64 of float32 predictions: back to float32 exactly
    return cascade_scores(scores[0].astype(np.float32), aten, cascade,
                          lambda idx: scores[1:, idx].astype(np.float32)).astype(np.float64)


def rankings_doc(problems: list[dict], rankers: list[Ranker], name: str, k: int, split: str,
                 models: list[str], cascade: int = 0) -> dict:
    ranked = {}
    for p in problems:
        if not p["configs"]:
            continue
        templates = [c["template"] for c in p["configs"]]
        s = ensemble_scores(model_scores(rankers, p), templates, cascade)  # ensemble: mean predicted log time
        ranked[p["problem"]] = {"configs": len(p["configs"]), "scores": [float(v) for v in s]}
    return {"format": "diode-baseline-rankings", "version": 1, "name": name, "k": k, "with_aten": False,
            "fallback": "inductor_default", "ops": OPS, "split": split, "combine": "mean_log_time", "cascade": cascade,
            "models": [{"path": str(m), "model_id": r.model.info.model_id} for m, r in zip(models, rankers)],
            "source": "bench/ensemble_rankings.py (torch_diode.hook.ranking.Ranker per model)", "problems": ranked}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--models", nargs="+", required=True, help="model directories (model.json + weights.msgpack)")
    ap.add_argument("--diode", default=os.environ.get("DIODE_BIN") or str(
        pathlib.Path(os.environ.get("DIODE_BUILD_DIR", REPO / "build")) / "cli/diode"))
    ap.add_argument("--split", default="test", choices=["train", "validation", "test", "all"])
    ap.add_argument("--k", type=int, default=1, help="configs the baseline benchmarks (its top-k; default 1)")
    ap.add_argument("--name", help="baseline name (default ensemble<N>, with k > 1 ensemble<N>_top<k>)")
    ap.add_argument("--out", help="rankings file (default <name>.rankings.json)")
    ap.add_argument("--cascade", type=int, default=0,
                    help="> 0: the other models score only the first model's CASCADE best configs and ATen "
                         "(torch_diode.model.cascade_scores); 0 (default): every model scores every config")
    ap.add_argument("--max-spread", type=float, default=0.0,
                    help="as diode validate --max-spread (score the file with the same value); 0: as measured")
    a = ap.parse_args()
    if a.k < 1:
        ap.error("--k must be positive")
    name = a.name or (f"ensemble{len(a.models)}" + (f"_top{a.k}" if a.k > 1 else ""))
    out = pathlib.Path(a.out or f"{name}.rankings.json")
    problems = list_split(a.diode, a.dataset, a.split, a.max_spread)
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    rankers = [Ranker(load_model_dir(m)) for m in a.models]
    doc = rankings_doc(problems, rankers, name, a.k, a.split, a.models, a.cascade)
    out.write_text(json.dumps(doc) + "\n")
    configs = sum(r["configs"] for r in doc["problems"].values())
    print(f"{name}: ranked {len(doc['problems'])} of {len(problems)} {a.split} problems ({configs} configs) "
          f"with {len(rankers)} models, top-{a.k}, {time.perf_counter() - t0:.2f} s; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
