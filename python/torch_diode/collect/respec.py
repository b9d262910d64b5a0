"""A shard spec that re-collects committed problems last measured by older collectors.

    python -m torch_diode.collect.respec --dataset datasets/nvidia-h100-80gb --before 2.2.0 \
        --id 2026112601 --out .carry/collect-2026112601/spec.json [--limit N]

A problem counts by the newest `torch_diode.collect` version that measured it (the rule of
diode-train and diode validate, which keep only that version's records of a problem), so a
problem already re-collected is not drawn again. The spec lists the problems whose newest
version is below --before, in the dataset's order (shard by shard as loaded, problem order
within each), EXHAUSTIVE, float32 with TF32 on only (as the dataset mix measures it), shard
id `dataset-recollect/ID`. Placed at `.carry/collect-ID/spec.json` it is what
`bash datasets/collect.sh ID N SECONDS` runs (collect.sh draws a spec only when none is
there), and `datasets/add_parts.py` files its parts as `<day>-recollect-ID-pFFF-LLL`. Never
reuse an ID, as with seeds. `--since V` keeps only problems whose newest version is at least V,
so the oldest band can have its own ID first (e.g. `--before 2.2.0` as one ID, then
`--before 2.5.0 --since 2.2.0 --part K/2` for the rest). On a machine of several GPUs, `--part K/N` gives each GPU its own
disjoint share under its own ID (`datasets/collect_gpus.sh N SECONDS dataset ID0 ID1 ...`).
`--model-top N --model DIR` (collector 2.6.0) also times the model's N top predicted configs
of each problem as static kernels (spec `timing.model_top`, `timing.model`; DIR as the device
sees it, e.g. the shipped bundle `python/torch_diode/bundles/KEY/V`), so its likely picks get
a record of the kernel Inductor compiles (bench/static_pick_split.py). `--split-list LIST`
keeps the problems of a `diode validate --list-split SPLIT --json` file (the test split first).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

from .. import wire
from ..dataset import load_dataset
from .spec import add_model_top_arguments, finish_spec

VERSION = r"(\d+)\.(\d+)\.(\d+)"  # MAJOR.MINOR.PATCH, in a shard's collector and in --before
COLLECTOR = re.compile(rf"^torch_diode\.collect {VERSION}$")


def version_of(collector: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a shard's `method.collector`; None for anything else (a replay,
    a community dataset, a wire version 1 shard): such problems are never re-collected here."""
    m = COLLECTOR.match(collector)
    return tuple(int(x) for x in m.groups()) if m else None


def parse_version(text: str, flag: str = "--before") -> tuple[int, int, int]:
    m = re.fullmatch(VERSION, text)
    if not m:
        raise ValueError(f"{flag} {text!r}: expected MAJOR.MINOR.PATCH, e.g. 2.2.0")
    return tuple(int(x) for x in m.groups())


def problem_key(p) -> tuple:
    """What identifies a problem across the wire format (a wire.Problem) and the problem list
    of `diode validate --list-split SPLIT --json` (a dict): the bench scripts use it too."""
    get = (lambda f: p[f]) if isinstance(p, dict) else (lambda f: getattr(p, f))
    # `scale` (wire v3) tells a scaled_mm problem's tensor-wise and row-wise twins apart; a
    # GEMM problem's is "none", also where a list written before v3 has no such field
    scale = p.get("scale", "none") if isinstance(p, dict) else getattr(p, "scale", "none")
    return tuple(get(f) for f in ("op", "batch", "m", "n", "k", "dtype_a", "dtype_b", "dtype_out",
                                  "trans_a", "trans_b", "bias")) + (scale,)


def read_split_list(path: str) -> set:
    """problem_key of every problem of a `diode validate --list-split SPLIT --json` file."""
    try:
        with open(path) as f:
            items = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"{path}: cannot read a split list: {e}")
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise SystemExit(f"{path}: expected the JSON list of `diode validate --list-split SPLIT --json`")
    try:
        return {problem_key(x) for x in items}
    except KeyError as e:
        raise SystemExit(f"{path}: a problem without {e}: not a `diode validate --list-split --json` list")


def stale_problems(dataset_dir: str, before: tuple[int, int, int],
                   since: tuple[int, int, int] = (0, 0, 0)) -> list[wire.Problem]:
    """Problems whose newest measuring collector is older than `before` and at least `since`,
    in dataset order."""
    newest: dict[wire.Problem, tuple[int, int, int]] = {}
    order: list[wire.Problem] = []
    for shard in load_dataset(dataset_dir).shards:
        v = version_of(shard.method.collector)
        if v is None:
            continue
        for p, recs in shard.records_by_problem():
            if not recs:
                continue
            if p not in newest:
                order.append(p)
                newest[p] = v
            else:
                newest[p] = max(newest[p], v)
    return [p for p in order if since <= newest[p] < before]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="a hardware's dataset folder, e.g. datasets/nvidia-h100-80gb")
    ap.add_argument("--before", required=True, help="re-collect problems whose newest collector is older than this")
    ap.add_argument("--since", default="0.0.0",
                    help="and whose newest collector is at least this (default: any)")
    ap.add_argument("--id", required=True, help="the re-collection's number (digits, never reused): shard id dataset-recollect/ID")
    ap.add_argument("--out", required=True, help="spec JSON to write")
    ap.add_argument("--part", default="0/1", metavar="K/N",
                    help="only every N-th problem from the K-th (0-based): N disjoint specs, one per GPU "
                         "(datasets/collect_gpus.sh with one ID each)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many problems of the part (0: all)")
    ap.add_argument("--split-list", metavar="LIST",
                    help="only the problems of this `diode validate --list-split SPLIT --json` file "
                         "(e.g. the test split first, so a model's regret is read on re-collected records)")
    add_model_top_arguments(ap)
    a = ap.parse_args(argv)
    if not re.fullmatch(r"\d{1,20}", a.id):
        ap.error(f"--id {a.id!r}: digits only (it takes a seed's place in file names)")
    if a.limit < 0:
        ap.error("--limit must be >= 0")
    m = re.fullmatch(r"(\d+)/(\d+)", a.part)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        ap.error(f"--part {a.part!r}: expected K/N with 0 <= K < N, e.g. 1/4")
    k, n = int(m.group(1)), int(m.group(2))
    try:
        before = parse_version(a.before)
        since = parse_version(a.since, "--since")
    except ValueError as e:
        ap.error(str(e))
    if since >= before:
        ap.error(f"--since {a.since} must be below --before {a.before}")
    if not os.path.isdir(a.dataset):
        ap.error(f"--dataset {a.dataset}: not a folder")
    probs = stale_problems(a.dataset, before, since)
    if a.split_list:
        keep = read_split_list(a.split_list)
        probs = [p for p in probs if problem_key(p) in keep]
    probs = probs[k::n]
    if a.limit:
        probs = probs[:a.limit]
    if not probs:
        band = f"below {a.before}" + (f" and at least {a.since}" if since > (0, 0, 0) else "")
        print(f"respec: no problem of {a.dataset} has its newest collector {band}: nothing to write")
        return 1
    spec = {"shard_id": f"dataset-recollect/{a.id}", "sweep_id": "dataset-recollect",
            "search_space": "EXHAUSTIVE", "problems": [wire.to_json(p) for p in probs], "tf32": [True]}
    try:
        finish_spec(spec, a)
    except ValueError as e:
        ap.error(str(e))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(spec, f, indent=1)
    print(f"respec: {len(probs)} problems of {a.dataset} last measured before torch_diode.collect {a.before}"
          f"{f' (at least {a.since})' if since > (0, 0, 0) else ''}"
          f"{f' (part {k}/{n})' if n > 1 else ''} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
