#!/usr/bin/env python3
"""How repeatable the collector's ATen timings are: the two cuBLAS records of an addmm with a row bias.

Inductor offers two cuBLAS choices for such an addmm: `aten::addmm` (its bias expanded to
M x N and copied into the output before the GEMM) and `aten::bias_addmm` (a 1-D bias: the
cuBLASLt bias epilogue, as eager addmm runs it). The collector records both, but it runs
the same call for both (collect/engine.py: every `aten*` choice is `_aten_fn`, which passes
the 1-D bias of collect/problems.py), so what their ratio measures is the **repeatability
of one cuBLAS call timed twice** in the same problem, not which call is faster (docs/hook.md,
Modes, says which one predict hands over and why). Per problem of a dataset with both ok
records it prints bias_addmm / aten, then per collector version the geomean, median and range.

    .venv/bin/python bench/dataset_bias_addmm.py datasets/nvidia-h100-80gb
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # stats

from stats import geomean, median  # noqa: E402  (one definition for every bench script, as `diode validate`)
from torch_diode.dataset import load_dataset  # noqa: E402

OWN, BIAS = "aten", "aten::bias_addmm"  # templates as the collector records them (collect/records.py)


def ratios(path: str) -> list[tuple[float, object]]:
    out = []
    for shard in load_dataset(path).shards:
        for p, recs in shard.records_by_problem():
            t = {r.config.template: r.median_us for r in recs if r.status == "ok" and r.config.template in (OWN, BIAS)}
            if OWN in t and BIAS in t:
                out.append((t[BIAS] / t[OWN], p, collector_of(shard)))
    return sorted(out, key=lambda x: x[0])


def collector_of(shard) -> str:
    """The collector version that wrote the shard (wire version 2 method), '?' when absent."""
    return shard.method.collector or "?"


def summary(xs: list[float]) -> str:
    return f"geomean {geomean(xs):.3f}, median {median(xs):.3f}, range {min(xs):.3f}-{max(xs):.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", help="dataset directory or file")
    a = ap.parse_args(argv)
    rs = ratios(a.dataset)
    if not rs:
        print("no problem with both aten and aten::bias_addmm ok records")
        return 1
    by = collections.defaultdict(list)
    for x, p, c in rs:
        print(f"{x:7.3f}  {p.op} {p.m}x{p.n}x{p.k} {p.dtype_a} bias={p.bias}  ({c})")
        by[c].append(x)
    print(f"the same cuBLAS call timed twice (bias_addmm / aten) over {len(rs)} problems: "
          f"{summary([x for x, _, _ in rs])}")
    for c in sorted(by):
        print(f"  {c}: {len(by[c])} problems, {summary(by[c])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
