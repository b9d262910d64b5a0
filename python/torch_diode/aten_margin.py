"""Predict mode's ATen margin, replayed on measured data: the one definition that the release
(python/release/choose_aten_margin.py) and the bench scripts (bench/predict_aten_margin.py,
bench/aten_margin_choice.py, bench/static_pick_split.py) share.

Predict mode (docs/hook.md, Modes) ranks what Inductor offers under max_autotune_gemm (the
DEFAULT list of Triton configs) together with the op's ATen kernel, and hands over the best-scored
Triton config only if its predicted time times (1 + margin) is below ATen's; outside the
model's training sizes (model.json dataset.domain) ATen is chosen. `replay_rows` replays that
decision on the problems of dataset files, `margin_row` scores it at one margin (regret against
the best measured, time against cuBLAS alone, how often ATen is chosen) and `choose` picks the
smallest margin of the grid `MARGINS` whose worst GEMM stays within a bound of cuBLAS.

Importing this module imports the hook's ranker (torch_diode.hook.ranking), hence torch.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import operator

from .collect.engine import FLAG_DEFAULT as DEFAULT_FLAG  # in Inductor's DEFAULT list
from .collect.respec import problem_key, read_split_list, version_of  # noqa: F401  (re-exported)
from .dataset import load_dataset
from .hook.ranking import ATEN_RULES, Options, config_key, model_family, ranker_for_model
from .hook.protocols import Ranker  # the GEMM Ranker and a family's FamilyRanker alike
from .wire import family_of
from .summary_stats import geomean, p90

__all__ = ["MARGINS", "RULES", "DEFAULT_FLAG", "disturbed", "problems_of", "predict_picks_triton", "predict_time",
           "member_gaps", "stats", "replay_rows", "margin_row", "choose", "check_bound_and_spread",
           "problem_key", "read_split_list"]

MARGINS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)


def disturbed(r, max_spread: float) -> bool:
    """The trainer's and `diode validate`'s rule (ShardRecord::spread_above, diode-train and
    diode validate --max-spread): an ok record whose spread (IQR) is above max_spread x its
    median was timed while the GPU was disturbed; with max_spread > 0 it counts as never timed."""
    return max_spread > 0 and r.status == "ok" and r.spread_us > max_spread * r.median_us


def problems_of(paths, keep=None, max_spread: float = 0.0, keep_failed: bool = False):
    """(problem, ok records of it) for every problem with an `aten` record and a DEFAULT Triton config
    (only those whose problem_key is in `keep`, when given; without the disturbed records when
    max_spread > 0, so a pick or a best never rests on one). keep_failed: also one failed record
    (compile error, out of resources) of each config that has no ok one, after the ok records,
    for a caller that must see a model pick such a config.

    A problem in several shards is one problem, grouped as `diode validate` and the trainer
    group it (models/src/problem_set.h, group_by_problem): only the shards of the newest
    torch_diode.collect version that measured it count, and a config timed in several of them
    takes the geometric mean of its ok medians (its DEFAULT flag if any shard set it)."""
    found: dict[tuple, list] = {}   # problem key -> [(collector version, problem, records)]
    for path in paths:
        for shard in load_dataset(path).shards:
            version = version_of(shard.method.collector) or (0, 0, 0)
            for p, recs in shard.records_by_problem():
                key = problem_key(p)
                if keep is None or key in keep:
                    found.setdefault(key, []).append((version, p, recs))
    for key, seen in found.items():
        newest = max(v for v, _, _ in seen)
        by_config: dict = {}
        failed: dict = {}
        for v, _, recs in seen:
            if v != newest:
                continue
            for r in recs:
                if r.status == "ok" and r.median_us > 0:
                    if not disturbed(r, max_spread):
                        by_config.setdefault(r.config, []).append(r)
                elif keep_failed:
                    failed.setdefault(r.config, r)
        rs = [rs_[0] if len(rs_) == 1 else dataclasses.replace(
                  rs_[0], median_us=math.exp(sum(math.log(r.median_us) for r in rs_) / len(rs_)),
                  flags=functools.reduce(operator.or_, (r.flags for r in rs_)))
              for rs_ in by_config.values()]
        if any(r.config.template == "aten" for r in rs) and any(r.config.is_triton and r.flags & DEFAULT_FLAG for r in rs):
            yield seen[0][1], rs + [r for c, r in failed.items() if c not in by_config]


RULES = ATEN_RULES   # the hook's rules (hook/ranking.py)


def predict_picks_triton(row: dict, margin: float, rule: str = "mean") -> bool:
    """Predict mode's replayed choice: the best-scored Triton config only if its predicted time
    times (1 + margin) is below ATen's (never outside the domain, never for margin inf).
    rule "mean" (the hook's) reads the model's score, an ensemble's mean over its members;
    "every_member" asks it of each member alone (row["member_gap"], the smallest member gap:
    replay_rows(members=True)), so a pick the members disagree on goes to ATen."""
    gap = row["gap"] if rule == "mean" else row["member_gap"]
    return margin != math.inf and gap > math.log1p(margin)


def predict_time(row: dict, margin: float, rule: str = "mean") -> float:
    """The measured time of predict mode's choice at `margin`: its Triton config's or ATen's."""
    return row["triton"] if predict_picks_triton(row, margin, rule) else row["aten"]


def member_gaps(ranker: Ranker, problem, triton_config, aten_config) -> list[float]:
    """Each ensemble member's own gap, its predicted log time of ATen minus that of
    `triton_config` (member 0 first; one value for a single model): the hook's own
    Ranker.member_gaps, which its every_member rule reads."""
    return ranker.member_gaps(problem, config_key(triton_config), config_key(aten_config))


def stats(xs):
    """(geomean, p90, max) of the regrets, as `diode validate` defines them (summary_stats.py)."""
    return geomean(xs), p90(xs), max(xs)


def replay_rows(model, datasets, keep=None, max_spread: float = 0.0, members: bool = False) -> list[dict]:
    """Per problem (problems_of) of the model's decision family: the best time, ATen's, the best-scored DEFAULT Triton config's,
    and `gap`, ATen's predicted log time minus that config's (-inf outside the model's training
    sizes, where the hook hands over ATen: model.json dataset.domain); with `members`, also
    `member_gap`, the smallest of member_gaps() for that config (-inf outside the domain)."""
    ranker = ranker_for_model(model)   # the model's own family's features (gemm or scaled_mm)
    family = model_family(model)
    rows = []
    for p, rs in problems_of(datasets, keep, max_spread):
        if family_of(p.op) != family:      # a hardware folder holds every family's shards
            continue
        cands = [r for r in rs if r.config.is_triton and r.flags & DEFAULT_FLAG]
        aten = next(r for r in rs if r.config.template == "aten")
        offered = cands + [aten]
        scores = ranker.rank(p, [r.config for r in offered], Options()).scores
        t = min(range(len(cands)), key=lambda j: scores[j])
        inside = model.info.in_domain(p.batch, p.m, p.n, p.k)
        row = {"problem": p, "best": min(r.median_us for r in rs), "aten": aten.median_us,
               "triton": cands[t].median_us, "gap": float(scores[-1] - scores[t]) if inside else -math.inf,
               "inside": inside, "default_best": min(r.median_us for r in offered)}
        if members:
            row["member_gap"] = min(member_gaps(ranker, p, cands[t].config, aten.config)) if inside else -math.inf
        rows.append(row)
    return rows


def margin_row(rows: list[dict], margin: float, rule: str = "mean") -> dict:
    """Predict mode at one margin over replay_rows() (by `rule`, RULES): regret against the best
    of everything measured and time against cuBLAS alone (geomean, p90, max), and how often
    ATen is chosen."""
    reg, vs_cublas, n_aten = [], [], 0
    for r in rows:
        t = predict_time(r, margin, rule)
        n_aten += not predict_picks_triton(r, margin, rule)
        reg.append(t / r["best"])
        vs_cublas.append(t / r["aten"])
    g, p90_, mx = stats(reg)
    gc, _, mxc = stats(vs_cublas)
    return {"margin": None if margin == math.inf else margin, "regret_geomean": g, "regret_p90": p90_,
            "regret_max": mx, "vs_cublas_geomean": gc, "vs_cublas_max": mxc, "aten_chosen": n_aten}


def choose(tables: dict[str, list[dict]], bound: float) -> float | None:
    """The smallest margin of the grid whose worst GEMM is within `bound` x cuBLAS in every table."""
    for i, m in enumerate(MARGINS):
        if all(t[i]["vs_cublas_max"] <= bound for t in tables.values()):
            return m
    return None


def check_bound_and_spread(a: argparse.Namespace) -> None:
    """--bound and --max-spread, as every margin choice takes them (bench/aten_margin_choice.py,
    python/release/choose_aten_margin.py)."""
    if not (math.isfinite(a.bound) and a.bound >= 1.0):
        raise SystemExit(f"--bound {a.bound}: must be a finite number >= 1")
    if not 0 <= a.max_spread <= 1000:
        raise SystemExit(f"--max-spread {a.max_spread}: must be within [0, 1000] (diode validate's range)")
