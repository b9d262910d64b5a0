"""Launch-config tables from coordinate-descent records, and their held-out replay.

  python -m torch_diode.tools.launch_config_table build REC.jsonl... --hardware KEY --out TABLE.json
  python -m torch_diode.tools.launch_config_table replay REC.jsonl... [--hold-out model]

REC.jsonl are torch_diode.collect.coordesc recorder files (bench/models.py
--record-coordesc writes one per model, dtype and max-autotune mode).

build: one entry per kernel source (features.source_sha256): the fastest config timed for
it over every record of it that the hook can run (its start plus table fields; a kernel
tuned in several runs keeps its fastest; at equal times, the walk's winner), with its class, size hints, that time and the heuristics' start time. The table is
what hook/launch_configs.py reads (TORCH_DIODE_LAUNCH_CONFIG_TABLE).

replay: for each value of the tag --hold-out names (default: model), a table is built from
the other values' records and every held-out record is looked up in it, as the hook would
look the kernel up. A hit is judged by the time the record measured for the config the hook
would run (the start with the table's fields set), when the walk timed it; otherwise it is
"untimed" (the record cannot say, and since the walk times configs near its own path, the
timed hits lean towards good ones: with more untimed than timed hits there is no verdict). Printed per held-out value and
overall: kernels, hits by source / nearest, untimed hits, and for the timed hits the
geomean of the predicted config's time over coordinate descent's winner and over the
heuristics' start. Misses walk as before (the hook's fallback), so they cost nothing here.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

from ..collect.coordesc import load
from ..hook import launch_configs as lc
from ..summary_stats import geomean


def _key(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


def _table_config(config: dict) -> dict:
    return {k: config[k] for k in lc.CONFIG_KEYS if k in config}


def applied(baseline: dict, table_config: dict) -> dict:
    """The config the hook runs for a table config: the start's with the table's fields set
    (hook/launch_configs.predicted_config, before its limits)."""
    return {**baseline, **table_config}


def tabulable(r: dict) -> bool:
    """A record the table can carry: measured times, a source hash, and a winner that differs
    from its start only in fields a table holds (a walk that moved another field, a
    mix-order reduction's NUM_STAGES say, would be replayed as a config nobody measured)."""
    if not (r.get("features", {}).get("source_sha256") and r["best"]["ms"] and r["baseline"]["ms"]):
        return False
    base, best = r["baseline"]["config"], r["best"]["config"]
    return all(best.get(k) == base.get(k) for k in set(base) | set(best) if k not in lc.CONFIG_KEYS)


def build_entries(records: list[dict]) -> list[dict]:
    by_source: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if tabulable(r):
            by_source[r["features"]["source_sha256"]].append(r)
    out = []
    for sha, rs in sorted(by_source.items()):
        # Fastest first; at equal times, a config coordinate descent kept as its winner. Only
        # configs that are their start plus table fields (what the hook can run).
        best = min(((t["ms"], t["config"] != r["best"]["config"], _key(_table_config(t["config"])), t["config"])
                    for r in rs for t in r["trials"] if t["ms"] is not None
                    and applied(r["baseline"]["config"], _table_config(t["config"])) == t["config"]),
                   default=None)
        if best is None:
            continue
        f = rs[0]["features"]
        out.append({"source_sha256": sha, "class": {c: f.get(c) for c in lc.CLASS_KEYS},
                    "size_hints": f["size_hints"], "config": _table_config(best[3]), "ms": best[0],
                    "baseline_ms": min(r["baseline"]["ms"] for r in rs)})
    return out


def table_doc(records: list[dict], hardware: str, measured: dict) -> dict:
    return {"format": lc.TABLE_FORMAT, "hardware": hardware, "measured": measured,
            "entries": build_entries(records)}


def replay(records: list[dict], hold_out: str = "model") -> dict:
    groups = sorted({str(r.get("tags", {}).get(hold_out)) for r in records})
    per: dict[str, dict] = {}
    for g in groups:
        train = [r for r in records if str(r.get("tags", {}).get(hold_out)) != g]
        test = [r for r in records if str(r.get("tags", {}).get(hold_out)) == g]
        entries = build_entries(train)
        table = lc.parse_table(json.dumps(table_doc(train, "replay", {})).encode(), "replay") if entries else None
        s = {"kernels": len(test), "source": 0, "nearest": 0, "untimed": 0, "vs_best": [], "vs_baseline": []}
        for r in test:
            hit = table.lookup(r.get("features", {})) if table else None
            if hit is None:
                continue
            s[hit[1]] += 1
            want = applied(r["baseline"]["config"], hit[0].config_dict())   # what the hook would run
            timed = [t["ms"] for t in r["trials"] if t["ms"] is not None and t["config"] == want]
            if not timed or not r["best"]["ms"] or not r["baseline"]["ms"]:
                s["untimed"] += 1
                continue
            s["vs_best"].append(min(timed) / r["best"]["ms"])
            s["vs_baseline"].append(min(timed) / r["baseline"]["ms"])
        per[g] = s
    total = {k: sum(s[k] for s in per.values()) for k in ("kernels", "source", "nearest", "untimed")}
    total["vs_best"] = [x for s in per.values() for x in s["vs_best"]]
    total["vs_baseline"] = [x for s in per.values() for x in s["vs_baseline"]]
    return {"per": per, "total": total}


def _line(name: str, s: dict) -> str:
    g = lambda xs: "-" if not xs else f"{geomean(xs):.3f}"
    line = (f"{name}: {s['kernels']} kernels, hits {s['source']} by source + {s['nearest']} nearest "
            f"({s['untimed']} untimed); timed hits {len(s['vs_best'])}: predicted / coordinate descent's winner "
            f"{g(s['vs_best'])}, / the heuristics' start {g(s['vs_baseline'])}")
    if s["untimed"] > len(s["vs_best"]):
        # The walk times configs near its own path: the timed hits lean towards good ones.
        line += " (most hits untimed: no verdict; measure them with the table on the GPU)"
    return line


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m torch_diode.tools.launch_config_table", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="a table from recorder files")
    b.add_argument("records", nargs="+")
    b.add_argument("--hardware", required=True, help="the hardware key the records were measured on")
    b.add_argument("--out", required=True)
    r = sub.add_parser("replay", help="held-out replay of tables built from recorder files")
    r.add_argument("records", nargs="+")
    r.add_argument("--hold-out", default="model", help="the record tag whose values are held out in turn")
    r.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        records = [rec for path in a.records for rec in load(path)]
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.cmd == "build":
        doc = table_doc(records, a.hardware, {"records": len(records), "files": len(a.records)})
        if not doc["entries"]:
            print("error: no record has a kernel source hash and measured times: nothing to tabulate",
                  file=sys.stderr)
            return 2
        data = json.dumps(doc, indent=1, sort_keys=True).encode()
        lc.parse_table(data, a.out)     # what the hook will accept, checked before it is written
        with open(a.out, "wb") as f:
            f.write(data)
        print(f"{a.out}: {len(doc['entries'])} kernels from {len(records)} records")
        return 0
    res = replay(records, a.hold_out)
    if a.json:
        print(json.dumps(res, indent=1))
        return 0
    for g, s in res["per"].items():
        print(_line(f"{a.hold_out}={g}", s))
    print(_line("all", res["total"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
