"""Re-seal a shard written before wire version 2 as a version 2 shard, adding its timing
method and the per-problem wall seconds from the collector's <out>.stats.json sidecar.

  python -m torch_diode.collect.reseal SHARD STATS_JSON OUT [--timing T --collector C]

For shards collected by engine v2 before the wire format carried these fields (the
H100 runs of 2026-11-25): records and problems are unchanged; the content hash is new.
"""
from __future__ import annotations

import argparse
import json

from .. import wire
from .engine import ENGINE_VERSION, TIMING_METHOD
from .records import compact_walls


def reseal(data: bytes, stats: dict, timing: str, collector: str) -> bytes:
    s = wire.decode_shard(data)
    # The sidecar names problems by their spec index; the shard kept them in spec order.
    walls = {i: p["wall_s"] for i, p in enumerate(stats["problems"])}
    if len(walls) != len(s.problems):
        raise ValueError(f"stats list {len(walls)} problems, the shard {len(s.problems)}")
    s.method = wire.CollectionMethod(timing, collector)
    s.problem_wall_s = tuple(compact_walls(s.records, walls))
    s.wire_version = 2
    out = wire.encode(wire.seal(s))
    wire.decode_shard(out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m torch_diode.collect.reseal")
    ap.add_argument("shard")
    ap.add_argument("stats")
    ap.add_argument("out")
    ap.add_argument("--timing", default=TIMING_METHOD)
    ap.add_argument("--collector", default=f"torch_diode.collect {ENGINE_VERSION}")
    a = ap.parse_args(argv)
    out = reseal(open(a.shard, "rb").read(), json.load(open(a.stats)), a.timing, a.collector)
    with open(a.out, "wb") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
