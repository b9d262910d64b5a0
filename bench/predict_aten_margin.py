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
import dataclasses
import functools
import json
import math
import operator
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))  # stats

from stats import geomean, p90  # noqa: E402  (one definition for every bench script, as `diode validate`)
from torch_diode.collect.engine import FLAG_DEFAULT as DEFAULT_FLAG  # noqa: E402  (in Inductor's DEFAULT list)
from torch_diode.collect.respec import version_of  # noqa: E402  (a shard's collector version)
from torch_diode.dataset import load_dataset  # noqa: E402
from torch_diode.collect.respec import problem_key, read_split_list  # noqa: E402,F401  (one definition)
from torch_diode.hook.ranking import DEFAULT_ATEN_MARGIN, ATEN_RULES, Options, Ranker, config_key  # noqa: E402
from torch_diode.model import load_model_dir  # noqa: E402
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
    for a caller that must see a model pick such a config (bench/pick_retime.py (script removed; git history)).

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
    """(geomean, p90, max) of the regrets, as `diode validate` defines them (bench/stats.py)."""
    return geomean(xs), p90(xs), max(xs)


def replay_rows(model, datasets, keep=None, max_spread: float = 0.0, members: bool = False) -> list[dict]:
    """Per problem (problems_of): the best time, ATen's, the best-scored DEFAULT Triton config's,
    and `gap`, ATen's predicted log time minus that config's (-inf outside the model's training
    sizes, where the hook hands over ATen: model.json dataset.domain); with `members`, also
    `member_gap`, the smallest of member_gaps() for that config (-inf outside the domain)."""
    ranker = Ranker(model)
    rows = []
    for p, rs in problems_of(datasets, keep, max_spread):
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
