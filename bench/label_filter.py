"""Copies of a dataset with runtime-size Triton records left out, to train on (an experiment).

A collector 2.2.0+ problem has two kinds of Triton record: its fastest configs re-timed as
static-shape kernels (what Inductor compiles; flag bit 3) and every other config's
runtime-size record, which can read well above the same config's static kernel
(bench/static_pick_split.py). The trainer uses both as if alike. This writes a copy of a
dataset without some runtime-size records, so `diode-train --data COPY` shows whether the
mixed labels cost top-1 (score the result on the original data with `diode validate --split
validation`; the problems, and so the splits, are the same):

  --mode static-only   in problems with static records, only those (and ATen, and failures)
  --mode near F        drop the runtime-size records below F x the problem's best static one
                       (the near contenders, where a sibling's static record and its own
                       runtime-size one disagree most); keep the slow ones

    PYTHONPATH=python python bench/label_filter.py datasets/nvidia-h100-80gb /tmp/h100-near --mode near 1.25
    mpirun -np 2 build/models/diode-train --hardware nvidia-h100-80gb --data /tmp/h100-near --out M --seed S --quiet
    build/cli/diode validate --model M --dataset datasets/nvidia-h100-80gb --split validation --json
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from torch_diode import wire  # noqa: E402
from torch_diode.collect.engine import FLAG_STATIC  # noqa: E402
from torch_diode.dataset import load_dataset  # noqa: E402


def keep_record(r, best_static: float | None, mode: str, factor: float) -> bool:
    """Whether record r stays; best_static: the problem's fastest static record (None: none)."""
    runtime_triton = r.status == "ok" and r.config.is_triton and not r.flags & FLAG_STATIC
    if best_static is None or not runtime_triton:
        return True
    if mode == "static-only":
        return False
    return r.median_us >= factor * best_static


def filter_shard(shard: wire.Shard, mode: str, factor: float) -> tuple[wire.Shard, int]:
    best: dict[int, float] = {}
    for r in shard.records:
        if r.status == "ok" and r.flags & FLAG_STATIC and r.median_us > 0:
            best[r.problem_index] = min(best.get(r.problem_index, float("inf")), r.median_us)
    recs = [r for r in shard.records if keep_record(r, best.get(r.problem_index), mode, factor)]
    return wire.seal(dataclasses.replace(shard, records=recs, sha256=b"")), len(shard.records) - len(recs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", help="dataset directory or file")
    ap.add_argument("out", help="directory for the filtered shards (created)")
    ap.add_argument("--mode", nargs="+", required=True, metavar=("MODE", "F"),
                    help="static-only, or near F (e.g. near 1.25)")
    a = ap.parse_args(argv)
    mode, factor = a.mode[0], 0.0
    if mode == "near":
        if len(a.mode) != 2:
            ap.error("--mode near takes a factor, e.g. --mode near 1.25")
        factor = float(a.mode[1])
        if not factor >= 1.0:
            ap.error("--mode near F: F must be >= 1")
    elif mode != "static-only" or len(a.mode) != 1:
        ap.error("--mode: static-only, or near F")
    os.makedirs(a.out, exist_ok=True)
    kept = dropped = 0
    for i, shard in enumerate(load_dataset(a.dataset).shards):
        out, n = filter_shard(shard, mode, factor)
        kept += len(out.records)
        dropped += n
        with open(os.path.join(a.out, f"{i:03d}-{shard.id.replace('/', '_')}.msgpack"), "wb") as f:
            f.write(wire.encode(out))
    print(f"label_filter: {mode}{f' {factor}' if factor else ''}: kept {kept:,} records, dropped {dropped:,} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
