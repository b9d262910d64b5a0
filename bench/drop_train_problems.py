#!/usr/bin/env python3
"""A copy of a dataset without part of its training problems of one kind: the data side of a
learning-curve experiment (does more data of that kind lower the model's regret there?).

    build/cli/diode validate --dataset datasets/nvidia-h200-144gb --list-split train --json > train.json
    python3 bench/drop_train_problems.py datasets/nvidia-h200-144gb --split-list train.json \\
        --max-k 64 --keep 1/2 --out /tmp/half

Of the train-split problems with K <= --max-k, a problem is kept when its hash (the list's
`problem` field, hex) modulo b is below a (--keep a/b: 1/2 keeps the even hashes, 1/4 those
divisible by 4) and left out of every shard otherwise; every other problem and record is
copied unchanged, so the
validation and test splits (chosen by the same hash, models/src/split.h) stay the same and a
model trained on the copy is scored on the same problems. Each shard is re-sealed.
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

from torch_diode import wire  # noqa: E402
from torch_diode.collect.respec import problem_key  # noqa: E402  (one definition)
from torch_diode.dataset import load_dataset  # noqa: E402


def dropped_keys(train_list: list[dict], max_k: int, keep: tuple[int, int]) -> set:
    """problem_key of the train problems with K <= max_k left out: with keep = (a, b), a
    problem is kept when int(hash) % b < a."""
    a, b = keep
    return {problem_key(p) for p in train_list if p["k"] <= max_k and int(p["problem"], 16) % b >= a}


def without(shard: wire.Shard, drop: set) -> wire.Shard | None:
    """The shard without the dropped problems (None when none is left), re-sealed."""
    keep = [i for i, p in enumerate(shard.problems) if problem_key(p) not in drop]
    if not keep:
        return None
    new_index = {old: new for new, old in enumerate(keep)}
    shard.problems = [shard.problems[i] for i in keep]
    shard.records = [dataclasses.replace(r, problem_index=new_index[r.problem_index])
                     for r in shard.records if r.problem_index in new_index]
    if shard.problem_wall_s:
        shard.problem_wall_s = tuple(shard.problem_wall_s[i] for i in keep)
    return wire.seal(shard)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--split-list", required=True, help="`diode validate --list-split train --json` output")
    ap.add_argument("--max-k", type=int, required=True, help="the kind: problems with K <= this")
    ap.add_argument("--keep", default="1/2", help="share of those kept, a/b (default 1/2)")
    ap.add_argument("--out", required=True, help="new dataset directory (must not exist)")
    a = ap.parse_args(argv)
    try:
        keep = tuple(int(x) for x in a.keep.split("/"))
        assert len(keep) == 2 and 0 <= keep[0] <= keep[1] and keep[1] > 0
    except (ValueError, AssertionError):
        ap.error(f"--keep {a.keep!r}: a/b with 0 <= a <= b expected")
    with open(a.split_list) as f:
        train = json.load(f)
    drop = dropped_keys(train, a.max_k, keep)
    os.makedirs(a.out)
    problems = written = 0
    for i, shard in enumerate(load_dataset(a.dataset).shards):
        problems += len(shard.problems)
        s = without(shard, drop)
        if s is not None:
            written += len(s.problems)
            with open(os.path.join(a.out, f"shard-{i:04d}.msgpack.gz"), "wb") as f:
                f.write(gzip.compress(wire.encode(s), 6))
    kind = sum(1 for p in train if p["k"] <= a.max_k)
    print(f"{kind} train problems with K <= {a.max_k}, {len(drop)} left out; {problems} -> {written} problems "
          f"(shard entries) in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
