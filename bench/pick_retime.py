"""Is the model's top-1 really slower than "DEFAULT list + cuBLAS", or is that the records' noise?
Re-times, side by side, the configs each of them picks.

Why: issue 19 asks the model's top-1 to beat, per op and dtype, the best of Inductor's DEFAULT
list plus cuBLAS. `diode validate` scores both on the dataset's records: the model's top-1 is
one record, the baseline is the lowest of ~20 records (DEFAULT configs and ATen), each a
median timed once. A record repeats to ~1% (bench/dataset_bias_addmm.py: the same cuBLAS call
timed twice, median ratio 1.007-1.011, range 0.93-1.08), so the lowest of 20 near-equal records
reads below its configs' real times (winner's curse) and the baseline gains by selection alone.
On the H100 test split (session 11) version 4's top-1 trails the baseline by 0.3-1.2% per
op, the size of that noise. Timing the two picks again, together, tells which it is.

  python bench/pick_retime.py --model python/torch_diode/bundles/nvidia-h100-80gb/5 \\
      --data datasets/nvidia-h100-80gb --split-list test.json [--start 0 --count 35] \\
      [--budget-s 480] [--json part.json]
  python bench/pick_retime.py --merge part1.json part2.json [--json all.json]
  python bench/pick_retime.py ... --dry-run          # CPU, FAKE timings: tests the driver

`test.json` is `diode validate --dataset DIR --list-split test --json` (the problems the model
was not trained on).

Per problem, the picks, from the records (as `diode validate`'s overall view):
- model: the model's top-1 over every candidate (Triton configs and ATen), scored by the hook's
  ranker (torch_diode.hook.ranking.Ranker, the same features and weights as `diode validate`);
- default: the lowest record among Inductor's DEFAULT Triton configs (record flag bit 1, set by
  Inductor itself at collection) and ATen. (`diode validate` finds the DEFAULT configs by tile,
  models/src/inductor_default.cpp; the flag is Inductor's own list for the problem);
- best: the lowest record of all; aten: the ATen record.
Then, in one process, every distinct pick is launched as the collector launches it (ATen:
engine._aten_fn with out=; Triton: the problem's static-shape kernel, as the collector's static
stage), checked against ATen's output, and timed with the collector's clock (BatchTimer:
CUDA events, GPU spin, cold L2), --rounds interleaved rounds of --repeats after 50 ms of
untimed rounds; median per pick.
Derived: model_vs_default = model / default, by the records and now; regret of each pick now
against the fastest pick now. If the recorded model_vs_default is above 1 and the fresh one is
not, the baseline's lead was the records' noise; if both agree, the model really trails.

--dry-run runs the whole driver on CPU with FAKE launches and made-up times; every output says FAKE.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))  # stats, collector_fidelity, predict_aten_margin

from gpu_clock import MAX_REL_ERR, CollectorClock  # noqa: E402  (the GPU side shared with aten_triton_clock)
from retime_run import FAKE, add_common_args, interleaved_medians, on_clock, run_merge, run_problems  # noqa: E402  (the driver, likewise)
from stats import geomean, ratio  # noqa: E402  (one definition for every bench script)
from torch_diode.collect.engine import FLAG_DEFAULT as DEFAULT_FLAG  # noqa: E402  (in Inductor's DEFAULT list)
from torch_diode.collect.engine import FLAG_STATIC  # noqa: E402  (re-timed as the static kernel at collection)

PICKS = ("model", "default", "best", "aten")


def is_aten(cfg) -> bool:
    """ATen records: `aten`, and for addmm `aten::bias_addmm`, which the collector times with
    the same call (engine.Engine.run), so both are launched as that one call here."""
    return cfg.template.startswith("aten")


def launch_key(cfg) -> str:
    if is_aten(cfg):
        return "aten"
    return (f"{cfg.template} {cfg.block_m}x{cfg.block_n}x{cfg.block_k} g{cfg.group_m} s{cfg.num_stages} "
            f"w{cfg.num_warps} k{int(cfg.even_k)} tf32={int(cfg.allow_tf32)}")


def load(paths, keep=None):
    """[(problem, its records)] for the problems with an ok Triton and an ok `aten` record
    (only those whose problem_key is in `keep`, when given). A problem in several shards (a
    re-collection) is one problem, grouped as `diode validate` groups it: the newest collector's
    records only (predict_aten_margin.problems_of, one definition), failed configs kept so a
    model top-1 on one is seen."""
    from predict_aten_margin import problems_of
    return [(p, rs) for p, rs in problems_of(paths, keep, keep_failed=True)
            if any(r.config.is_triton for r in rs if r.status == "ok")]


def picks(recs, scores) -> dict:
    """{pick: record} (see the module doc). `scores[i]` is the model's predicted log time of
    recs[i]; the model's top-1 is the lowest, ties to the first, as `diode validate` breaks them.
    A top-1 whose record is not ok (failed to compile, out of resources) stays the pick: the row
    says so and is left out of the figures, as validate counts it the slowest."""
    ok = [r for r in recs if r.status == "ok" and r.median_us > 0]
    top = min(range(len(recs)), key=lambda i: scores[i])
    default = [r for r in ok if (r.config.is_triton and r.flags & DEFAULT_FLAG) or r.config.template == "aten"]
    return {"model": recs[top], "default": min(default, key=lambda r: r.median_us),
            "best": min(ok, key=lambda r: r.median_us),
            "aten": min((r for r in ok if r.config.template == "aten"), key=lambda r: r.median_us)}


def recorded(p, chosen: dict) -> dict:
    from torch_diode.collect.problems import describe
    row = {"problem": describe(p), "op": p.op, "dtype": p.dtype_a}
    for k in PICKS:
        r = chosen[k]
        row[k + "_config"] = launch_key(r.config)
        row[k + "_recorded_us"] = r.median_us if r.status == "ok" else None
        row[k + "_static"] = bool(r.flags & FLAG_STATIC)
    row["model_status"] = chosen["model"].status
    row["same_pick"] = row["model_config"] == row["default_config"]
    return row


def derive(row: dict) -> dict:
    rec_best = row.get("best_recorded_us")
    row["model_recorded_regret"] = ratio(row.get("model_recorded_us"), rec_best)
    row["default_recorded_regret"] = ratio(row.get("default_recorded_us"), rec_best)
    row["model_vs_default_recorded"] = ratio(row.get("model_recorded_us"), row.get("default_recorded_us"))
    now = [row.get(k + "_now_us") for k in PICKS]
    fastest = min((x for x in now if x), default=None)
    for k in PICKS:
        row[k + "_now_regret"] = ratio(row.get(k + "_now_us"), fastest)
    row["model_vs_default_now"] = ratio(row.get("model_now_us"), row.get("default_now_us"))
    row["model_vs_aten_now"] = ratio(row.get("model_now_us"), row.get("aten_now_us"))
    return row


def _group_stats(rows: list[dict]) -> dict:
    return {"problems": len(rows),
            "same_pick": sum(r["same_pick"] for r in rows),
            "model_vs_default_recorded": geomean(r["model_vs_default_recorded"] for r in rows),
            "model_vs_default_now": geomean(r["model_vs_default_now"] for r in rows),
            "model_recorded_regret": geomean(r["model_recorded_regret"] for r in rows),
            "default_recorded_regret": geomean(r["default_recorded_regret"] for r in rows),
            "model_now_regret": geomean(r["model_now_regret"] for r in rows),
            "default_now_regret": geomean(r["default_now_regret"] for r in rows),
            "model_vs_aten_now": geomean(r["model_vs_aten_now"] for r in rows)}


def usable(r: dict) -> bool:
    return not r.get("error") and r.get("model_vs_default_now") is not None


def summarize(rows: list[dict], skipped: int = 0) -> dict:
    """Overall and per op and per dtype, over the rows timed without error."""
    ok = [r for r in rows if usable(r)]
    groups = collections.defaultdict(list)
    for r in ok:
        groups["op " + r["op"]].append(r)
        groups["dtype " + r["dtype"]].append(r)
    return {"rows": len(rows), "usable": len(ok), "skipped": skipped,
            "errors": sum(bool(r.get("error")) for r in rows),
            "model_top1_failed": sum(r.get("model_status") != "ok" for r in rows),
            "overall": _group_stats(ok), "groups": {k: _group_stats(v) for k, v in sorted(groups.items())}}


def merge(parts: list[dict]) -> dict:
    """Parts of one run (--start/--count slices) joined; the summary a single run would give."""
    models = {p.get("model") for p in parts}
    if len(models) > 1:
        raise ValueError(f"parts of different models: {sorted(str(m) for m in models)}")
    rows = [r for p in parts for r in p["rows"]]
    return {"rows": rows, "summary": summarize(rows, sum(p.get("skipped", 0) for p in parts)),
            "model": parts[0].get("model"), "devices": sorted({p.get("device", "?") for p in parts}),
            "fake": any(p.get("fake") for p in parts)}


def _f(x, fmt=".3f"):
    return "-" if x is None else format(x, fmt)


def markdown(sm: dict, device: str = "", fake: bool = False) -> str:
    head = f"{FAKE} timings (--dry-run): the numbers mean nothing\n\n" if fake else ""
    lines = [head + f"device: {device}; {sm['usable']} of {sm['rows']} problems timed "
             f"({sm['errors']} errors, {sm['model_top1_failed']} with a failed top-1, {sm['skipped']} skipped by the budget)",
             "",
             "| group | problems | same pick | model / default: recorded | model / default: now "
             "| regret now: model / default | regret recorded: model / default | model / cuBLAS now |",
             "|---|---|---|---|---|---|---|---|"]
    for name, g in [("overall", sm["overall"])] + list(sm["groups"].items()):
        lines.append(f"| {name} | {g['problems']} | {g['same_pick']} | {_f(g['model_vs_default_recorded'])} | "
                     f"{_f(g['model_vs_default_now'])} | {_f(g['model_now_regret'])} / {_f(g['default_now_regret'])} | "
                     f"{_f(g['model_recorded_regret'])} / {_f(g['default_recorded_regret'])} | {_f(g['model_vs_aten_now'])} |")
    lines.append("")
    lines.append("model / default < 1: the model's top-1 is faster than the best of the DEFAULT list + cuBLAS. "
                 "'now': every pick re-timed side by side; 'regret now': against the fastest pick now.")
    return "\n".join(lines)


# -- clocks: the GPU one and the FAKE one of --dry-run ------------------------------------

class GpuClock(CollectorClock):
    """The picks of one problem launched as the collector launches them, on the GPU."""

    def __init__(self):
        super().__init__("pick_retime")

    def setup(self, p, recs, configs: dict) -> dict:
        """{launch key: (launch, relative error against ATen)} for the configs {key: config},
        TF32 as the problem was collected (restored by teardown)."""
        io = self.problem(p, recs)
        out = {}
        for key, cfg in configs.items():
            fn = self.aten(io) if key == "aten" else self.triton(io, cfg)
            out[key] = (fn, self.check(fn, io))
        return out


class FakeClock:
    """--dry-run: no GPU; a launch is its key, and its time is made up from its record
    (the record's median with seeded noise of ~1%). Only the driver's plumbing is real."""
    fake = True
    device = f"{FAKE} (--dry-run, no GPU)"

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.base = {}

    def setup(self, p, recs, configs: dict) -> dict:
        by_config = {r.config: r.median_us for r in recs if r.status == "ok" and r.median_us > 0}
        self.base = {key: by_config[cfg] for key, cfg in configs.items()}
        return {key: (key, 0.0) for key in configs}

    def teardown(self):
        self.base = {}

    def warm(self, fns, n):
        pass

    def events_us(self, fn, n) -> list[float]:
        return [self.base[fn] * (1 + self.rng.gauss(0, 0.01)) for _ in range(n)]


def measure(clock, p, recs, chosen: dict, a) -> dict:
    """One problem's row: the recorded picks, then every distinct pick timed now, interleaved."""
    row = recorded(p, chosen)
    if row["model_status"] != "ok":
        row["error"] = f"model top-1 record is {row['model_status']}"
        return derive(row)
    configs = {}
    for k in PICKS:
        configs.setdefault(launch_key(chosen[k].config), chosen[k].config)

    def time_picks(fns):
        bad = {k: err for k, (_, err) in fns.items() if not err <= MAX_REL_ERR}
        if bad:
            row["error"] = f"wrong result: {bad}"
            return
        now = interleaved_medians(clock, {k: fn for k, (fn, _) in fns.items()}, a.rounds, a.repeats)
        for k in PICKS:
            row[k + "_now_us"] = now[launch_key(chosen[k].config)]

    return derive(on_clock(clock, row, lambda: clock.setup(p, recs, configs), time_picks))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="", help="model directory (model.json + weights)")
    ap.add_argument("--data", nargs="+", default=[], help="dataset files or directories")
    ap.add_argument("--split-list", default="", metavar="LIST",
                    help="only the problems of this `diode validate --list-split SPLIT --json` file")
    ap.add_argument("--seed", type=int, default=1, help="--dry-run's noise")
    add_common_args(ap)
    a = ap.parse_args(argv)
    if a.merge:
        return run_merge(ap, a, merge, lambda doc, dev: markdown(doc["summary"], dev, doc["fake"]))
    if not a.data or not a.model:
        ap.error("--model and --data (or --merge) are required")
    if min(a.rounds, a.repeats) < 1:
        ap.error("--rounds and --repeats must be >= 1")
    from predict_aten_margin import read_split_list
    from torch_diode.hook.ranking import Options, Ranker
    from torch_diode.model import load_model_dir
    ranker = Ranker(load_model_dir(a.model))
    items = load(a.data, read_split_list(a.split_list) if a.split_list else None)
    if not items:
        ap.error(f"no problem with ok Triton and ATen records in {a.data}"
                 + (f" among those of {a.split_list}" if a.split_list else ""))
    clock = FakeClock(a.seed) if a.dry_run else GpuClock()

    def one(p, recs):
        return measure(clock, p, recs, picks(recs, ranker.rank(p, [r.config for r in recs], Options()).scores), a)

    return run_problems(a, argv, clock, items, one,
                        ("problem", "same_pick", "model_vs_default_recorded", "model_vs_default_now",
                         "model_config", "default_config", "error"),
                        summarize, lambda sm, rows, dev: markdown(sm, dev, clock.fake), {"model": a.model})


if __name__ == "__main__":
    sys.exit(main())
