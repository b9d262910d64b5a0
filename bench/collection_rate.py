"""Collection rate of committed dataset files, groups side by side (no GPU needed).

  python bench/collection_rate.py \
      --group "one H100, session 11" 1 datasets/nvidia-h100-80gb/2026-11-26-mix2-2026112518-p0[03]*.gz \
      --group "nvidia-h100-x4, session 13" 4 datasets/nvidia-h100-80gb/2026-11-26-mix2-202611252[0-2]-*.gz ...

Each `--group LABEL GPUS FILE...` names shards (wire version 2, gzip or not) that were
collected on one machine with GPUS collectors running at once (datasets/collect_gpus.sh:
one per GPU). The rate comes from what the shards record, the collector's wall seconds of
each problem (`problem_wall_s`), so it counts collection only, not machine start-up or the
transfers of a device call:
  * problems per GPU-hour = problems / sum(wall) x 3600;
  * problems per machine-hour = that x GPUS, as the GPUS collectors ran concurrently
    (valid when their recorded seconds overlap, as collect_gpus.sh's do: same deadline);
  * median and p90 seconds per problem (bench/stats.py, the one definition).
Every group after the first is also given as a ratio to the first, per GPU and per machine.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from stats import median, p90, ratio  # noqa: E402
from torch_diode.dataset import load_dataset  # noqa: E402


def read_walls(path: str) -> tuple[int, list[float]]:
    """(problems, per-problem wall seconds) of one shard file; a shard without the
    seconds (wire version 1) is an error: its rate cannot be known."""
    problems, walls = 0, []
    for shard in load_dataset(path).shards:  # gzip or not, bounded as every dataset reader is
        if len(shard.problem_wall_s) != len(shard.problems):
            raise SystemExit(f"{path}: {len(shard.problem_wall_s)} wall times for {len(shard.problems)} problems "
                             "(wire version 1 or re-sealed without them): no rate")
        problems += len(shard.problems)
        walls += shard.problem_wall_s
    return problems, walls


def group_rate(label: str, gpus: int, files: list[str]) -> dict:
    problems, walls = 0, []
    for f in files:
        n, w = read_walls(f)
        problems += n
        walls += w
    total = sum(walls)
    per_gpu_h = problems / total * 3600 if total > 0 else None
    return {"label": label, "gpus": gpus, "files": len(files), "problems": problems,
            "recorded_s": total, "per_gpu_hour": per_gpu_h,
            "per_machine_hour": per_gpu_h * gpus if per_gpu_h is not None else None,
            "median_s": median(walls), "p90_s": p90(walls)}


def parse_groups(argv: list[str]) -> list[tuple[str, int, list[str]]]:
    """--group LABEL GPUS FILE... [--group ...]: argparse has no repeated variadic
    triple, so the groups are split here, strictly."""
    groups: list[tuple[str, int, list[str]]] = []
    i = 0
    while i < len(argv):
        if argv[i] != "--group":
            raise SystemExit(f"expected --group, got {argv[i]!r}")
        if i + 2 >= len(argv):
            raise SystemExit("--group needs LABEL GPUS FILE...")
        label, gpus_text = argv[i + 1], argv[i + 2]
        try:
            gpus = int(gpus_text)
        except ValueError:
            raise SystemExit(f"--group {label!r}: GPUS must be an integer, got {gpus_text!r}")
        if gpus < 1:
            raise SystemExit(f"--group {label!r}: GPUS must be at least 1")
        j = i + 3
        files = []
        while j < len(argv) and argv[j] != "--group":
            files.append(argv[j])
            j += 1
        if not files:
            raise SystemExit(f"--group {label!r}: no files")
        groups.append((label, gpus, files))
        i = j
    if not groups:
        raise SystemExit("usage: collection_rate.py --group LABEL GPUS FILE... [--group ...]")
    return groups


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    rows = [group_rate(*g) for g in parse_groups(argv)]
    base = rows[0]
    print(f"{'group':40s} {'GPUs':>4s} {'problems':>8s} {'recorded s':>10s} {'/GPU-h':>7s} "
          f"{'/machine-h':>10s} {'median s':>8s} {'p90 s':>6s} {'x first /GPU':>12s} {'x first /machine':>16s}")
    for r in rows:
        print(f"{r['label'][:40]:40s} {r['gpus']:4d} {r['problems']:8d} {r['recorded_s']:10.0f} "
              f"{fmt(r['per_gpu_hour'], '7.0f')} {fmt(r['per_machine_hour'], '10.0f')} "
              f"{fmt(r['median_s'], '8.1f')} {fmt(r['p90_s'], '6.1f')} "
              f"{fmt(ratio(r['per_gpu_hour'], base['per_gpu_hour']), '12.2f')} "
              f"{fmt(ratio(r['per_machine_hour'], base['per_machine_hour']), '16.2f')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
