#!/usr/bin/env python3
"""Where one mode's cold compile spends the time another's does not (issue 20's compile lines).

Reads a results.json of `bench/hook_end_to_end.py --profile` (each row's compile_profile: its
top functions by cumulative time) and prints, per workload, the functions whose cumulative
time in MODE exceeds BASE's by the most. A function missing from BASE's top list counts as 0
there (so a difference is an upper bound when BASE's list was cut).

    python3 bench/compile_profile_diff.py RESULTS.json [--base plain] [--mode diode_predict] [--top 30]
"""
from __future__ import annotations

import argparse
import json
import sys


def short(func: str) -> str:
    """A profile row's function without its site-packages prefix."""
    return func.split("site-packages/")[-1]


def cumulative(row: dict) -> dict[str, float]:
    """Function -> cumulative seconds of one result row's compile_profile."""
    return {f: cum for f, _calls, _own, cum in row["compile_profile"]["cumulative"]}


def diff(base: dict, mode: dict, top: int) -> list[tuple[float, float, str]]:
    """(MODE - BASE, MODE, function) for the functions of MODE's list, largest difference first."""
    b, m = cumulative(base), cumulative(mode)
    rows = [(m[f] - b.get(f, 0.0), m[f], f) for f in m]
    return sorted(rows, key=lambda r: -r[0])[:top]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--base", default="plain")
    ap.add_argument("--mode", default="diode_predict")
    ap.add_argument("--workload", action="append", help="only these workloads (repeatable)")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args(argv)
    with open(a.results) as f:
        results = json.load(f)["results"]
    by = {(r["workload"], r["mode"]): r for r in results if r.get("compile_profile")}
    workloads = sorted({w for w, _ in by} if not a.workload else a.workload)
    shown = 0
    for w in workloads:
        base, mode = by.get((w, a.base)), by.get((w, a.mode))
        if base is None or mode is None:
            continue
        shown += 1
        print(f"## {w}: {a.mode} {mode['compile_s']:.3f} s, {a.base} {base['compile_s']:.3f} s (profiled)")
        for d, m, f in diff(base, mode, a.top):
            print(f"  {d:+8.3f} {m:8.3f}  {short(f)}")
    if not shown:
        print(f"error: no workload has profiled rows of both {a.base} and {a.mode} in {a.results}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
