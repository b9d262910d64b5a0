#!/usr/bin/env python3
"""Which cuBLAS call predict mode should hand over for addmm with a row bias (docs/hook.md, Modes).

Inductor offers two cuBLAS choices for such an addmm: `aten::addmm` (its bias expanded to
M x N and copied into the output before the GEMM) and `aten::bias_addmm` (a 1-D bias: the
cuBLASLt bias epilogue, as eager addmm runs it). The collector times both; this prints,
per problem of a dataset that has both ok records, bias_addmm / aten, and their geomean.

    .venv/bin/python bench/dataset_bias_addmm.py datasets/nvidia-h100-80gb
"""
from __future__ import annotations

import argparse
import collections
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

from torch_diode.dataset import load_dataset  # noqa: E402

OWN, BIAS = "aten", "aten::bias_addmm"  # templates as the collector records them (collect/records.py)


def ratios(path: str) -> list[tuple[float, object]]:
    out = []
    for shard in load_dataset(path).shards:
        times: dict = collections.defaultdict(dict)
        for r in shard.records:
            if r.status == "ok" and r.config.template in (OWN, BIAS):
                times[r.problem_index][r.config.template] = r.median_us
        for i, t in times.items():
            if OWN in t and BIAS in t:
                out.append((t[BIAS] / t[OWN], shard.problems[i]))
    return sorted(out, key=lambda x: x[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", help="dataset directory or file")
    a = ap.parse_args(argv)
    rs = ratios(a.dataset)
    if not rs:
        print("no problem with both aten and aten::bias_addmm ok records")
        return 1
    for x, p in rs:
        print(f"{x:7.3f}  {p.op} {p.m}x{p.n}x{p.k} {p.dtype_a} bias={p.bias}")
    g = math.exp(sum(math.log(x) for x, _ in rs) / len(rs))
    faster = sum(x < 1 for x, _ in rs)
    print(f"bias_addmm / aten over {len(rs)} problems: geomean {g:.3f}, median {rs[len(rs) // 2][0]:.3f}, "
          f"bias_addmm faster on {faster}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
