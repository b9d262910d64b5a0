"""Where a model's top-1 regret comes from: picks timed as Inductor compiles them, or not.

Collector 2.2.0+ times every offered Triton config once as a runtime-size kernel (sizes as
arguments) and re-times only its fastest ones, and the DEFAULT list's fastest, as the
problem's static-shape kernel (sizes as literals, what Inductor compiles; record flag bit 3,
FLAG_STATIC; docs/collector.md). So a problem's best record is almost always static (or
ATen), while a model's pick may be a config with a runtime-size record only: a different
kernel than the one the hook would compile, read ~5% slower on average (up to 30% at small
K). This splits the model's top-1 regret on the records by the kind of record its pick has:

  static/aten   the pick's record is a static-shape kernel or cuBLAS (timed as compiled)
  runtime-size  the pick's only record is a runtime-size kernel; for these it also prints
                the best static record of the same tile (BLOCK_M x BLOCK_N x BLOCK_K,
                other stages or warps), which is what the data can say of such a pick

Problems are grouped as `diode validate` groups them (torch_diode.aten_margin.problems_of:
the newest collector's records); the model ranks every ok record of a problem (ATen included)
and its top-1 is the lowest predicted time, as `diode validate`'s overall top-1.

    build/cli/diode validate --dataset datasets/nvidia-h100-80gb --list-split test --json > test.json
    PYTHONPATH=python python bench/static_pick_split.py --model python/torch_diode/bundles/nvidia-h100-80gb/7 \\
        --split-list test.json datasets/nvidia-h100-80gb

`--uncompiled-list OUT` also writes the problems of the split list whose model top-N holds a
record not timed as compiled, in the split list's own format: what a fair re-collection with
that model's picks needs (`python -m torch_diode.collect.respec --split-list OUT --model-top
10 --model MODEL`, datasets/README), since only those problems' records change.
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import sys

from torch_diode.aten_margin import problems_of, read_split_list
from torch_diode.collect.engine import FLAG_STATIC
from torch_diode.collect.respec import problem_key
from torch_diode.hook.ranking import Options, Ranker, config_key
from torch_diode.model import load_model_dir
from torch_diode.summary_stats import geomean


def timed_as_compiled(r) -> bool:
    """A record of the kernel the hook would run: a static-shape Triton kernel, or cuBLAS."""
    return bool(r.flags & FLAG_STATIC) or not r.config.is_triton


def tile(c) -> tuple:
    return (c.template, c.block_m, c.block_n, c.block_k)


def split_rows(model, datasets, keep=None, max_spread: float = 0.0, top: int = 10) -> list[dict]:
    """Per problem: the top-1 pick's regret, whether its record is timed as compiled, and for
    a runtime-size pick the regret of the best static record of the same tile (None if none);
    and how many of the model's `top` best-scored records are timed as compiled. That share is
    what makes two models' top-5/top-10 comparable: a re-collection with one model's picks
    (collector timing.model_top) raises it for that model only (docs/collector.md)."""
    ranker = Ranker(model)
    rows = []
    for p, recs in problems_of(datasets, keep, max_spread):
        r = ranker.rank_keys(p, [config_key(x.config) for x in recs], Options(top_k=1, threshold=0.0))
        # The `top` best-scored records (at least the pick), ties to the first as validate: a
        # partial selection, not a sort of the problem's ~1,400 records.
        order = heapq.nsmallest(max(top, 1), range(len(recs)), key=lambda j: (r.scores[j], j))
        best = min(x.median_us for x in recs)
        pick = recs[order[0]]
        sib = [x.median_us for x in recs if x.flags & FLAG_STATIC and tile(x.config) == tile(pick.config)]
        rows.append({"problem": p, "regret": pick.median_us / best, "compiled": timed_as_compiled(pick),
                     "best_compiled": any(timed_as_compiled(x) and x.median_us == best for x in recs),
                     "same_tile_static": min(sib) / best if sib and not timed_as_compiled(pick) else None,
                     "top": len(order[:top]),
                     "top_compiled": sum(timed_as_compiled(recs[j]) for j in order[:top])})
    return rows


def top_uncompiled(row: dict) -> bool:
    """Whether a row's model top-N holds a record not timed as compiled."""
    return row.get("top_compiled", 0) < row.get("top", 0)


def uncompiled_top(rows: list[dict]) -> set:
    """problem_key of every row whose model top-N holds a record not timed as compiled."""
    return {problem_key(r["problem"]) for r in rows if top_uncompiled(r)}


def summary(rows: list[dict]) -> dict:
    comp = [r["regret"] for r in rows if r["compiled"]]
    run = [r for r in rows if not r["compiled"]]
    sib = [r["same_tile_static"] for r in run if r["same_tile_static"] is not None]
    n_top = sum(r.get("top", 0) for r in rows)
    return {"problems": len(rows), "top1": geomean([r["regret"] for r in rows]),
            "best_is_compiled": sum(r["best_compiled"] for r in rows),
            "top_picks": n_top, "top_picks_compiled": sum(r.get("top_compiled", 0) for r in rows),
            "problems_top_uncompiled": sum(top_uncompiled(r) for r in rows),
            "compiled": {"problems": len(comp), "top1": geomean(comp) if comp else None},
            "runtime_size": {"problems": len(run), "top1": geomean([r["regret"] for r in run]) if run else None,
                             "with_same_tile_static": len(sib),
                             "same_tile_static_best": geomean(sib) if sib else None,
                             "top1_if_same_tile_static": geomean([r["same_tile_static"] or r["regret"]
                                                                  for r in run]) if run else None}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="+", help="dataset files or directories")
    ap.add_argument("--model", required=True, help="model or bundle directory")
    ap.add_argument("--split-list", help="`diode validate --list-split SPLIT --json` output: only its problems")
    ap.add_argument("--max-spread", type=float, default=0.0,
                    help="leave out records whose IQR exceeds this x their median (diode validate's --max-spread)")
    ap.add_argument("--per-problem", action="store_true", help="print every runtime-size pick")
    ap.add_argument("--top", type=int, default=10,
                    help="also count how many of the model's TOP best-scored records are timed as compiled (default 10)")
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--uncompiled-list", metavar="OUT",
                    help="with --split-list: write the split list's problems whose model top TOP holds a record "
                         "not timed as compiled (the list format, for respec --split-list)")
    a = ap.parse_args(argv)
    if a.uncompiled_list and not a.split_list:
        ap.error("--uncompiled-list needs --split-list (it writes a subset of that list)")
    keep = read_split_list(a.split_list) if a.split_list else None
    if a.top < 1:
        ap.error("--top: at least 1")
    rows = split_rows(load_model_dir(a.model), a.datasets, keep, a.max_spread, a.top)
    if not rows:
        print("static_pick_split: no problem with an ATen record and a DEFAULT config", file=sys.stderr)
        return 1
    s = summary(rows)
    fmt = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
    print(f"{s['problems']} problems; the best record is static or ATen on {s['best_is_compiled']}")
    print("| the model's top-1 pick has | problems | top-1 regret geomean |")
    print("|---|---|---|")
    print(f"| a static-shape or ATen record | {s['compiled']['problems']} | {fmt(s['compiled']['top1'])} |")
    rt = s["runtime_size"]
    print(f"| a runtime-size record only | {rt['problems']} | {fmt(rt['top1'])} |")
    print(f"| all | {s['problems']} | {fmt(s['top1'])} |")
    print(f"runtime-size picks with a static record of the same tile: {rt['with_same_tile_static']} of "
          f"{rt['problems']}, whose best is {fmt(rt['same_tile_static_best'])} (the runtime-size picks' geomean "
          f"with it in their place: {fmt(rt['top1_if_same_tile_static'])})")
    print(f"the model's top {a.top} picks timed as compiled (static or ATen): {s['top_picks_compiled']} of "
          f"{s['top_picks']} ({s['top_picks_compiled'] / max(1, s['top_picks']):.1%})")
    if a.per_problem:
        for r in sorted((r for r in rows if not r["compiled"]), key=lambda r: -r["regret"]):
            p = r["problem"]
            print(f"  {p.op} {p.batch}x{p.m}x{p.n}x{p.k} {p.dtype_a}: pick {r['regret']:.3f}, "
                  f"same tile static {fmt(r['same_tile_static'])}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=1)
    if a.uncompiled_list:
        want = uncompiled_top(rows)
        with open(a.split_list) as f:
            items = [x for x in json.load(f) if problem_key(x) in want]
        with open(a.uncompiled_list, "w") as f:
            json.dump(items, f, indent=1)
        print(f"{len(items)} problems with a top-{a.top} record not timed as compiled -> {a.uncompiled_list}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
