"""Does a GEMV table still pick well on another machine's grid? A CPU replay of a measured grid.

    python bench/gemv_table_transfer.py GRID.json TABLE.json [TABLE.json ...]

GRID is a `.grid.json` (or bench/gemv_reduction.py's gemv-results.json) that
`python -m torch_diode.tools.gemv_table` wrote: every grid shape's time for every launch
config and cuBLAS's time, measured side by side in one run. Each TABLE (the shipped one, the
one made from GRID itself, ...) is looked up on GRID's shapes, and its config's time in GRID
is set against that shape's fastest config and against cuBLAS. A table made on another machine
that reads close to GRID's own table here picks as well on GRID's machine as a table measured
there would.

Per table it prints, over the shapes both hold: how many configs agree with GRID's own pick
(the first TABLE is taken as GRID's own when --own is not given), the geomean and worst of
config time / fastest, and the geomean and worst of config time / cuBLAS.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from stats import geomean  # noqa: E402
from torch_diode.tools.gemv_table import rel_times, shape_of  # noqa: E402  (the tool's one reading of a grid)


def grid_rows(doc: dict) -> list[dict]:
    """The measured shapes of a .grid.json ({"grid": [...]}) or a gemv-results.json ({"shapes": [...]})."""
    rows = doc.get("grid", doc.get("shapes"))
    if not isinstance(rows, list):
        raise SystemExit("gemv_table_transfer: the grid file has neither 'grid' nor 'shapes'")
    return rows


def table_configs(doc: dict) -> dict[tuple, dict]:
    """(dtype, n, k, layout) -> the table's launch config (shape_of, as the grid's rows)."""
    return {shape_of(e): e["config"] for e in doc["entries"]}


def transfer(grid: list[dict], configs: dict[tuple, dict], own: dict[tuple, dict] | None = None) -> dict:
    """One table on one grid: per shape the table's config time over the fastest and over
    cuBLAS; shapes the table does not hold, or whose config the grid did not time, are counted
    apart (never a silent drop)."""
    rel, us = rel_times(grid)     # per shape and config key: time / the fastest, and the time
    to_best, to_cublas, agree, missing, untimed = [], [], 0, 0, 0
    for row in grid:
        shape = shape_of(row)
        cfg = configs.get(shape)
        if cfg is None:
            missing += 1
            continue
        key = json.dumps(cfg, sort_keys=True)       # rel_times' config key
        if key not in us.get(shape, {}):
            untimed += 1
            continue
        to_best.append(rel[shape][key])
        to_cublas.append(us[shape][key] / row["cublas_us"])
        if own is not None and own.get(shape) == cfg:
            agree += 1
    return {"shapes": len(to_best), "missing": missing, "untimed": untimed, "agree": agree,
            "to_best_geomean": geomean(to_best), "to_best_worst": max(to_best, default=None),
            "to_cublas_geomean": geomean(to_cublas), "to_cublas_worst": max(to_cublas, default=None)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("grid")
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--own", help="the table made from GRID (default: the first TABLE)")
    a = ap.parse_args(argv)
    with open(a.grid) as f:
        grid = grid_rows(json.load(f))
    own_path = a.own or a.tables[0]
    with open(own_path) as f:
        own = table_configs(json.load(f))
    print(f"grid {a.grid}: {len(grid)} shapes; agreement counted against {own_path}")
    print("| table | shapes | same config | config / fastest (geomean, worst) | config / cuBLAS (geomean, worst) |")
    print("|---|---|---|---|---|")
    for path in a.tables:
        with open(path) as f:
            r = transfer(grid, table_configs(json.load(f)), own)
        if not r["shapes"]:
            print(f"| {path} | 0 (missing {r['missing']}, untimed {r['untimed']}) | - | - | - |")
            continue
        print(f"| {path} | {r['shapes']} (missing {r['missing']}, untimed {r['untimed']}) | {r['agree']} "
              f"| {r['to_best_geomean']:.3f}, {r['to_best_worst']:.3f} "
              f"| {r['to_cublas_geomean']:.3f}, {r['to_cublas_worst']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
