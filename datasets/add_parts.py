"""Add the parts a device call brought back to datasets/, named from their own content.

    python datasets/add_parts.py /work/.device/N/*/part-*.msgpack [--datasets datasets] [--dry-run]

Each PART is what `datasets/collect.sh` (or `collect_gpus.sh`) mirrored into $OUT: a shard of
the dataset mix, `part-FFF.msgpack`, whose FFF is the index of its first problem in the seed's
sample. It becomes `datasets/<hardware key>/<date>-<mix>-<seed>-pFFF-LLL.msgpack.gz` (zlib level 9,
mtime 0: the same bytes on every run; files made earlier with GNU `gzip -9n` hold the same
content in other deflate bytes), where
  * the hardware key is the shard's own (torch_diode.hardware.hardware_key, the rule the hub
    and `diode dataset stats` use), so an H200 part never lands in the H100 folder;
  * mix and seed come from the shard id that collect.sh gives (`dataset-mix/SEED` is `mix`,
    `dataset-mix2/SEED` is `mix2`; a re-collection's `dataset-recollect/ID`, from
    `python -m torch_diode.collect.respec`, is `recollect` with its ID in the seed's place);
  * LLL = FFF + problems - 1, and the date is the shard's creation day (UTC).
Refused, with nothing written: a part that does not decode, a shard id of another kind, a
problem range that overlaps a file of the same seed already in the folder (or another part
of this call), a file that exists. For each file written it prints the datasets/README row's
figures: problems, records, the recorded seconds (the per-problem wall times the shard
carries) and the collector.
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

from torch_diode import wire  # noqa: E402
from torch_diode.collect.committed import committed_name, committed_ranges  # noqa: E402  (the one definition of committed names)
from torch_diode.hardware import hardware_key  # noqa: E402

PART_NAME = re.compile(r"^part-(\d+)\.msgpack$")
SHARD_ID = re.compile(r"^dataset-(mix2?|recollect)/(\d+)$")


class PartError(ValueError):
    pass


def plan(path: str) -> dict:
    """What one part becomes: {path, key, name, seed, first, last, ...}; PartError if it cannot."""
    m = PART_NAME.match(os.path.basename(path))
    if not m:
        raise PartError(f"{path}: not a collect.sh part (part-FFF.msgpack)")
    first = int(m.group(1))
    try:
        with open(path, "rb") as f:
            shard = wire.decode(f.read(), expect="shard")
    except (OSError, wire.WireError) as e:
        raise PartError(f"{path}: {e}") from e
    sid = SHARD_ID.match(shard.id)
    if not sid:
        raise PartError(f"{path}: shard id {shard.id!r} is not the dataset mix's (dataset-mix/SEED, "
                        "dataset-mix2/SEED or dataset-recollect/ID): name it by hand")
    if not shard.problems:
        raise PartError(f"{path}: no problems")
    mix, seed = sid.group(1), sid.group(2)
    last = first + len(shard.problems) - 1
    day = datetime.datetime.fromtimestamp(shard.created_ms / 1000, datetime.timezone.utc).date()
    key = hardware_key(shard.hardware)
    return {"path": path, "key": key, "seed": seed, "first": first, "last": last,
            "name": committed_name(day.isoformat(), mix, seed, first, last),
            "problems": len(shard.problems), "records": len(shard.records),
            "recorded_s": sum(shard.problem_wall_s), "collector": shard.method.collector}


def check(plans: list[dict], datasets: str) -> None:
    """Overlaps with committed files of the same seed and hardware, or between the parts."""
    seen: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    for p in plans:
        k = (p["key"], p["seed"])
        if k not in seen:
            seen[k] = committed_ranges(os.path.join(datasets, p["key"]), p["seed"])
        for a, b, name in seen[k]:
            if p["first"] <= b and a <= p["last"]:
                raise PartError(f"{p['path']}: problems {p['first']}-{p['last']} of seed {p['seed']} "
                                f"overlap {name} ({a}-{b})")
        if os.path.exists(os.path.join(datasets, p["key"], p["name"])):
            raise PartError(f"{p['path']}: {p['key']}/{p['name']} exists")
        seen[k].append((p["first"], p["last"], p["path"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parts", nargs="+", help="part-FFF.msgpack files from $OUT")
    ap.add_argument("--datasets", default=os.path.join(ROOT, "datasets"), help="the datasets folder")
    ap.add_argument("--dry-run", action="store_true", help="print the names, write nothing")
    a = ap.parse_args(argv)
    try:
        plans = sorted((plan(p) for p in a.parts), key=lambda p: (p["key"], p["seed"], p["first"]))
        check(plans, a.datasets)
    except PartError as e:
        print(f"add_parts: {e}; nothing written", file=sys.stderr)
        return 1
    for p in plans:
        dest = os.path.join(a.datasets, p["key"], p["name"])
        if not a.dry_run:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(p["path"], "rb") as f:
                data = gzip.compress(f.read(), compresslevel=9, mtime=0)
            tmp = dest + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, dest)
        print(f"{'would write' if a.dry_run else 'wrote'} {p['key']}/{p['name']}: seed {p['seed']}, "
              f"{p['problems']} problems ({p['first']}-{p['last']}), {p['records']:,} records, "
              f"{p['recorded_s']:.0f} recorded s, {p['collector']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
