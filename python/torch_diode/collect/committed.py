"""Which problems of a seed are already collected: the one reading of committed file names.

A device call's parts are filed under datasets/<hardware key>/ as
`<day>-<mix>-<SEED>-pFFF-LLL.msgpack.gz` (committed_name; datasets/add_parts.py writes them), FFF and LLL the first and
last problem index of the seed's sample the file holds. Two tools read those names:
datasets/collect.sh, to resume a seed after its last collected problem, and add_parts.py,
to refuse a part that overlaps a committed file. Both go through this module.

    python -m torch_diode.collect.committed resume CARRY_DIR SEED [--datasets DIR]

prints the first problem index still to collect: one past the last problem in the
machine's own parts (CARRY_DIR/part-*.msgpack.stats.json, which survive while the machine
stays warm) or in any committed file of SEED under DIR/*/ (default `datasets`).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

COMMITTED = re.compile(r"-(\d+)-p(\d+)-(\d+)\.msgpack\.gz$")


def committed_name(day: str, mix: str, seed: str, first: int, last: int) -> str:
    """The name a part is committed under (COMMITTED reads it back): DAY-MIX-SEED-pFFF-LLL.msgpack.gz."""
    return f"{day}-{mix}-{seed}-p{first:03d}-{last:03d}.msgpack.gz"


def committed_ranges(folder: str, seed: str) -> list[tuple[int, int, str]]:
    """(first, last, file name) of every committed file of `seed` in one hardware folder."""
    out = []
    if os.path.isdir(folder):
        for f in sorted(os.listdir(folder)):
            m = COMMITTED.search(f)
            if m and m.group(1) == seed:
                out.append((int(m.group(2)), int(m.group(3)), f))
    return out


def resume_index(carry_dir: str, seed: str, datasets: str = "datasets") -> int:
    """The first problem index of `seed` that neither the machine's parts nor a committed file holds."""
    done = 0
    for f in sorted(glob.glob(os.path.join(carry_dir, "part-*.msgpack.stats.json"))):
        with open(f) as fh:
            idx = [p["index"] for p in json.load(fh)["problems"]]
        done = max([done] + [i + 1 for i in idx])
    if os.path.isdir(datasets):
        for hw in sorted(os.listdir(datasets)):
            for _, last, _ in committed_ranges(os.path.join(datasets, hw), seed):
                done = max(done, last + 1)
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("resume", help="print the first problem index still to collect")
    r.add_argument("carry_dir")
    r.add_argument("seed")
    r.add_argument("--datasets", default="datasets")
    a = ap.parse_args(argv)
    if not a.seed.isdigit():
        raise SystemExit(f"seed {a.seed!r}: expected digits (a sample seed or a re-collection id)")
    print(resume_index(a.carry_dir, a.seed, a.datasets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
