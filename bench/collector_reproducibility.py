#!/usr/bin/env python3
"""How far two collections of the same problems on two machines of one GPU kind agree: the
noise floor under every model's top-1 regret (issue 19's plateau).

Given pairs of shards A B (what `datasets/collect.sh` brings back: `part-FFF.msgpack`, or a
committed `.msgpack.gz`) that hold some of the same problems, measured on two machines, it
matches each problem's configs (same KernelConfig, status ok in both, timed the same way:
both static-shape kernels or both not) and prints, over the shared problems:

  * machine offset: per problem the median of B/A over its configs (geomean and spread);
  * config noise: |log(B/A)| of each config after removing its problem's offset (median, p90);
  * same best: the share of problems whose fastest shared config (ATen included) is the same in both;
  * cross regret: B's time of A's fastest config / B's fastest (and the reverse), geomean
    and worst: what a perfect model of machine A's labels loses on machine B;
  * ATen decision: the share of problems where both agree on whether cuBLAS is fastest.

    python3 bench/collector_reproducibility.py A1 B1 [A2 B2 ...] [--split-k K] [--json OUT]

--split-k K also prints the figures of the problems with K <= K and of the others apart.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from stats import geomean, median, quantile  # noqa: E402
from torch_diode import wire  # noqa: E402
from torch_diode.model import is_aten_template  # noqa: E402

STATIC = 8   # ShardRecord.flags bit 3 (collect/engine.py FLAG_STATIC): timed as a static-shape kernel


def read_shard(path: str) -> wire.Shard:
    with open(path, "rb") as f:
        data = f.read()
    return wire.decode_shard(gzip.decompress(data) if path.endswith(".gz") else data)


def timings(shard: wire.Shard) -> dict:
    """Problem -> {(config, static): median us} of its ok records."""
    out: dict = {}
    for p, recs in shard.records_by_problem():
        out[p] = {(r.config, bool(r.flags & STATIC)): r.median_us for r in recs
                  if r.status == "ok" and r.median_us > 0}
    return out


def compare_problem(a: dict, b: dict) -> dict | None:
    """The figures of one problem measured in both (None: fewer than two shared configs)."""
    shared = [k for k in a if k in b]
    if len(shared) < 2:
        return None
    a, b = {k: a[k] for k in shared}, {k: b[k] for k in shared}   # the same candidates on both
    logs = [math.log(b[k] / a[k]) for k in shared]
    offset = median(logs)
    best_a, best_b = min(a, key=a.get), min(b, key=b.get)
    regret_ab, regret_ba = b[best_a] / b[best_b], a[best_b] / a[best_a]
    return {"configs": len(shared), "offset": math.exp(offset), "noise": [abs(x - offset) for x in logs],
            "same_best": best_a == best_b, "regret_ab": regret_ab, "regret_ba": regret_ba,
            "aten_agrees": is_aten_template(best_a[0].template) == is_aten_template(best_b[0].template)}


def summarize(rows: list[dict]) -> dict:
    noise = [x for r in rows for x in r["noise"]]
    ab, ba = [r["regret_ab"] for r in rows], [r["regret_ba"] for r in rows]
    offs = [r["offset"] for r in rows]
    return {"problems": len(rows), "configs": sum(r["configs"] for r in rows),
            "offset_geomean": geomean(offs), "offset_min": min(offs), "offset_max": max(offs),
            "noise_median_pct": 100 * math.expm1(median(noise)), "noise_p90_pct": 100 * math.expm1(quantile(noise, 0.9)),
            "same_best": sum(r["same_best"] for r in rows) / len(rows),
            "regret_ab_geomean": geomean(ab), "regret_ab_max": max(ab), "regret_ba_geomean": geomean(ba),
            "regret_ba_max": max(ba), "aten_agrees": sum(r["aten_agrees"] for r in rows) / len(rows)}


def report(s: dict) -> None:
    print(f"{s['problems']} problems, {s['configs']} configs timed on both machines")
    print(f"machine offset B/A per problem: geomean {s['offset_geomean']:.4f} ({s['offset_min']:.4f}-{s['offset_max']:.4f})")
    print(f"config noise after the offset: median {s['noise_median_pct']:.2f}%, p90 {s['noise_p90_pct']:.2f}%")
    print(f"same fastest config: {100 * s['same_best']:.1f}% of problems; ATen-fastest agrees: {100 * s['aten_agrees']:.1f}%")
    print(f"cross regret (B's time of A's best / B's best): geomean {s['regret_ab_geomean']:.4f}, worst {s['regret_ab_max']:.4f}")
    print(f"cross regret (A's time of B's best / A's best): geomean {s['regret_ba_geomean']:.4f}, worst {s['regret_ba_max']:.4f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shards", nargs="+", help="pairs: A1 B1 A2 B2 ...")
    ap.add_argument("--split-k", type=int, default=0, help="also the problems with K <= this and the others apart")
    ap.add_argument("--json", help="write the summary here too")
    a = ap.parse_args(argv)
    if len(a.shards) % 2:
        ap.error("give the shards in pairs (A B)")
    rows = []
    for pa, pb in zip(a.shards[::2], a.shards[1::2]):
        ta, tb = timings(read_shard(pa)), timings(read_shard(pb))
        for p in ta:
            if p in tb:
                r = compare_problem(ta[p], tb[p])
                if r is not None:
                    rows.append((p, r))
    if not rows:
        print("error: the pairs share no problem with two or more matching configs", file=sys.stderr)
        return 2
    s = summarize([r for _, r in rows])
    report(s)
    if a.split_k:
        for label, part in ((f"K <= {a.split_k}", [r for p, r in rows if p.k <= a.split_k]),
                            (f"K > {a.split_k}", [r for p, r in rows if p.k > a.split_k])):
            print(f"\n{label}:")
            if part:
                s[label] = summarize(part)
                report(s[label])
            else:
                print("no problem")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
