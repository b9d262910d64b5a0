#!/usr/bin/env python3
"""How well a collector's static-shape records stand for Inductor's kernels, from data
already collected (no GPU): the numbers behind collector 2.4.0's static chase and its
static repeats budget (bench/RESULTS.md, collector 2.3.0 section).

    python bench/static_record_check.py --data datasets/nvidia-h100-80gb \
        --collector "torch_diode.collect 2.3.0" \
        [--fidelity bench/data/fidelity-2026-11-25-collector-2.3.0/merged.json] [--below-us 10]

Prints, for the collector's ok Triton records:
  * static records (flag bit 3) below --below-us: the median of IQR / median and the
    repeats, and the standard error of such a median (normal approximation,
    1.2533 x IQR / 1.349 / sqrt(repeats));
  * problems whose best Triton record is not static, or tied exactly with another;
  * with --fidelity (a collector_fidelity.py --json or --merge output of the same data):
    recorded median / the bench's static-kernel time per config, for static and
    first-pass records apart (median, p10, p90). A fidelity row is joined to its record
    by config and the recorded median it printed (collector_recorded_us).
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
from collections import defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # stats

from stats import median, quantile  # noqa: E402  (one definition for every bench script, as `diode validate`)
from torch_diode import wire  # noqa: E402
from torch_diode.collect.engine import FLAG_STATIC  # noqa: E402
from torch_diode.dataset import load_dataset  # noqa: E402


def spread_line(name: str, xs: list[float]) -> str:
    return (f"{name}: {len(xs)} configs, median {median(xs):.4f}, "
            f"p10 {quantile(xs, 0.1):.4f}, p90 {quantile(xs, 0.9):.4f}")


def record_key(cfg: dict, median_us: float) -> tuple:
    return (round(median_us, 4), cfg["template"], cfg["block_m"], cfg["block_n"], cfg["block_k"],
            cfg["num_stages"], cfg["num_warps"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="dataset file or directory")
    ap.add_argument("--collector", required=True, help='e.g. "torch_diode.collect 2.3.0"')
    ap.add_argument("--fidelity", help="collector_fidelity.py JSON of the same data")
    ap.add_argument("--below-us", type=float, default=10.0)
    a = ap.parse_args()

    shards = [s for s in load_dataset(a.data).shards if s.method.collector == a.collector]
    if not shards:
        print(f"no shard of {a.collector!r} in {a.data}")
        return 1
    rel_iqr, repeats, by_key = [], [], {}
    problems = not_static = tied = 0
    for s in shards:
        by_problem = defaultdict(list)
        for r in s.records:
            if r.status != "ok" or not r.config.is_triton:
                continue
            by_problem[r.problem_index].append(r)
            by_key[record_key(wire.to_json(r.config), r.median_us)] = r
            if r.flags & FLAG_STATIC and r.median_us < a.below_us:
                rel_iqr.append(r.spread_us / r.median_us)
                repeats.append(r.repeats)
        for recs in by_problem.values():
            best = min(r.median_us for r in recs)
            problems += 1
            not_static += not any(r.flags & FLAG_STATIC for r in recs if r.median_us == best)
            tied += sum(1 for r in recs if r.median_us == best) > 1
    print(f"{a.collector}: {len(shards)} shards, {problems} problems with ok Triton records")
    if rel_iqr:
        iqr, n = median(rel_iqr), median(repeats)
        print(f"static records below {a.below_us:g} us: {len(rel_iqr)}, IQR / median: median {iqr:.4f} "
              f"(p90 {quantile(rel_iqr, 0.9):.4f}), repeats: median {n:g}; standard error of such a "
              f"median ~{1.2533 * iqr / 1.349 / math.sqrt(n):.2%}")
    print(f"best Triton record not static on {not_static} of {problems} problems; "
          f"tied exactly with another record on {tied}")
    if a.fidelity:
        rows = json.loads(pathlib.Path(a.fidelity).read_text())["configs"]
        ratios: dict = defaultdict(list)   # (static?, below --below-us?) -> ratios
        for x in rows:
            r = by_key.get(record_key(x["config"], x["collector_recorded_us"]))
            if r is not None and x.get("static_us"):
                ratio = x["collector_recorded_us"] / x["static_us"]
                ratios[(bool(r.flags & FLAG_STATIC), False)].append(ratio)
                if x["static_us"] < a.below_us:
                    ratios[(bool(r.flags & FLAG_STATIC), True)].append(ratio)
        for (static, small), xs in sorted(ratios.items(), reverse=True):
            name = ("static" if static else "first-pass") + " records" + (f", below {a.below_us:g} us" if small else "")
            print(spread_line(f"recorded / the bench's static-kernel time, {name}", xs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
