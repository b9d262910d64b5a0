"""Would a small first-stage model (a pre-filter) keep the ensemble's picks? Issue 19's ranking speed.

    build/cli/diode validate --dataset datasets/nvidia-h200-144gb --list-split validation --json > val.json
    .venv/bin/python bench/prefilter_recall.py --split-list val.json --data datasets/nvidia-h200-144gb \\
        --model python/torch_diode/bundles/nvidia-h200-144gb/7 --prefilter /tmp/tiny [--keep 64,128,256] [--json out.json]

Why: a cache miss ranks ~1,400 EXHAUSTIVE configs, and on a slower CPU (bench/RESULTS.md,
the Intel Xeon VM) member 0's forward over all of them is most of the 2 ms budget: its
matmuls are arithmetic-bound. A pre-filter, a much smaller network scoring every config,
would hand only its K best (and ATen) to member 0 and the cascade. Before building it into
the model format and both rankers this measures what it would cost in picks: per problem,
the ensemble ranks (a) every measured candidate, as `diode validate` does, and (b) only the
pre-filter's K lowest-scored candidates plus every ATen candidate; the top-1 and top-5
regret of both against the best measured (geomean, p90), and the recall: how often (b)'s
pick is (a)'s. Candidates, records and regret are validate's (predict_aten_margin.problems_of;
a failed pick counts as the problem's slowest ok record). Decide on the validation split.
With --time-rows (default 1,400) it also times, side by side in the same process, the
forwards of a cache miss now and with the pre-filter at each K (thread CPU, one thread).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from predict_aten_margin import problems_of, read_split_list  # noqa: E402  (validate's grouping)
from stats import geomean, median, p90  # noqa: E402  (one definition for every bench script)
from top1_variants import candidate_times  # noqa: E402  (validate's times of one problem)


def picks(scores, idx: list[int]) -> list[int]:
    """The candidates `idx` ordered by score, ties to the lower index (as validate orders)."""
    return sorted(idx, key=lambda i: (scores[i], i))


def evaluate(model, prefilter, problems: list, keeps: list[int]) -> dict:
    """{"all": ..., "keep K": ...}: top-1 / top-5 regret (geomean, p90) and the recall of the pick."""
    import numpy as np
    from torch_diode.hook.ranking import Options, Ranker
    from torch_diode.model import is_aten_template
    full, pre = Ranker(model), Ranker(prefilter)
    rows: dict = {"all": {"top1": [], "top5": []}}
    for k in keeps:
        rows[f"keep {k}"] = {"top1": [], "top5": [], "same_pick": 0}
    for p, rs in problems:
        times, best, _ = candidate_times(rs)   # problems_of: every problem has its ATen record
        configs = [r.config for r in rs]
        aten = [i for i, c in enumerate(configs) if is_aten_template(c.template)]
        everything = list(range(len(rs)))
        s_all = full.rank(p, configs, Options()).scores
        order = picks(s_all, everything)
        rows["all"]["top1"].append(times[order[0]] / best)
        rows["all"]["top5"].append(min(times[i] for i in order[:5]) / best)
        s_pre = np.asarray(pre.rank(p, configs, Options()).scores)
        first = picks(s_pre, everything)
        for k in keeps:
            kept = sorted(set(first[:k]) | set(aten))
            # the ensemble on the kept candidates alone: its cascade is drawn from them
            sub = full.rank(p, [configs[i] for i in kept], Options()).scores
            sub_order = [kept[j] for j in picks(sub, list(range(len(kept))))]
            r = rows[f"keep {k}"]
            r["top1"].append(times[sub_order[0]] / best)
            r["top5"].append(min(times[i] for i in sub_order[:5]) / best)
            r["same_pick"] += sub_order[0] == order[0]
        full.clear_cache()
        pre.clear_cache()
    out = {}
    for label, r in rows.items():
        out[label] = {"top1": {"geomean": geomean(r["top1"]), "p90": p90(r["top1"])},
                      "top5": {"geomean": geomean(r["top5"]), "p90": p90(r["top5"])}}
        if "same_pick" in r:
            out[label]["same_pick"] = r["same_pick"]
    return out


def forward_ms(model, prefilter, rows: int, keeps: list[int], repeat: int) -> dict:
    """Median thread-CPU ms, one thread, of the forwards a cache miss runs on `rows` configs:
    now (member 0 on every row, members 1.. on the cascade set) and with the pre-filter
    (pre-filter on every row, member 0 on K rows, members 1.. on the cascade set). The
    values of the rows do not matter to the time (dense matmuls and activations)."""
    import statistics
    import time
    import torch
    torch.set_num_threads(1)
    n_in = model.info.architecture.input
    x = torch.randn(rows, n_in)
    cas = (model.info.architecture.cascade or 0) + 1   # the cascade set: K best and the ATen row

    def others(k):
        if model.others:
            model.run_others(x[:k])

    def now():
        model.module(x)
        others(cas)

    def staged(k):
        def run():
            prefilter.module(x)
            model.module(x[:k])
            others(cas)
        return run

    def median(fn) -> float:
        with torch.no_grad():
            for _ in range(10):
                fn()
            ts = []
            for _ in range(repeat):
                t0 = time.thread_time()
                fn()
                ts.append(time.thread_time() - t0)
        return statistics.median(ts) * 1e3

    out = {"now": median(now)}
    for k in keeps:
        out[f"keep {k}"] = median(staged(min(k, rows)))
    out["prefilter alone"] = median(lambda: prefilter.module(x))
    return out


def miss_ms(models: dict, problems: int, repeat: int) -> dict:
    """The hook's whole cache-miss path (Ranker.rank_ktcs on Inductor's 1,400 EXHAUSTIVE
    KernelTemplateChoices, bench/hook_rank_speed.py's list and problems) for each model,
    interleaved problem by problem in one process, so that a noisy machine slows every model
    alike: {label: (median, p90) thread-CPU ms}, one thread."""
    import time
    import torch
    import hook_rank_speed as hrs
    from torch_diode.hook.ranking import Options, Ranker
    torch.set_num_threads(1)
    ktcs = hrs.candidate_list()
    probs = hrs.problems(problems + 1, seed=7)
    rankers = {label: Ranker(m) for label, m in models.items()}
    times: dict = {label: [] for label in models}
    for r in rankers.values():
        r.rank_ktcs(probs[0], ktcs, Options())   # the first forward of each module: not a miss
    for _ in range(repeat):
        for p in probs[1:]:
            for label, r in rankers.items():
                r.clear_cache()
                t0 = time.thread_time()
                r.rank_ktcs(p, ktcs, Options())
                times[label].append(time.thread_time() - t0)
    return {label: (median(ts) * 1e3, p90(ts) * 1e3) for label, ts in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the shipped model or ensemble directory")
    ap.add_argument("--prefilter", required=True, help="the small first-stage model directory (diode-train)")
    ap.add_argument("--data", required=True, action="append", help="dataset file or directory (repeatable)")
    ap.add_argument("--split-list", required=True, help="`diode validate --list-split validation --json` output")
    ap.add_argument("--keep", default="64,128,256", help="pre-filter sizes K, comma-separated")
    ap.add_argument("--max-spread", type=float, default=0.5, help="as diode validate (default 0.5)")
    ap.add_argument("--json", default="", help="write the table here")
    ap.add_argument("--time-rows", type=int, default=1400,
                    help="also time the forwards of a cache miss on this many configs (0: skip)")
    ap.add_argument("--repeat", type=int, default=200, help="timed forwards per variant (median)")
    ap.add_argument("--joined", default="",
                    help="the model and pre-filter joined (`diode ensemble ... --prefilter DIR --keep K`): "
                         "also time the hook's whole cache-miss path of --model and of it, interleaved")
    ap.add_argument("--miss-problems", type=int, default=20, help="problems per round of the --joined timing")
    a = ap.parse_args(argv)
    try:
        keeps = sorted({int(k) for k in a.keep.split(",")})
    except ValueError:
        raise SystemExit(f"--keep {a.keep!r}: whole numbers, comma-separated") from None
    if not keeps or keeps[0] < 1:
        raise SystemExit("--keep: at least one size, each >= 1")
    from torch_diode.model import load_model_dir
    model, prefilter = load_model_dir(a.model), load_model_dir(a.prefilter)
    problems = list(problems_of(a.data, read_split_list(a.split_list), a.max_spread))
    if not problems:
        raise SystemExit("no problem of the split list in the data")
    out = evaluate(model, prefilter, problems, keeps)
    arch = prefilter.info.architecture
    print(f"{len(problems)} problems; pre-filter hidden {arch.hidden} x {arch.blocks} blocks")
    print("| candidates ranked by the ensemble | top-1 geomean / p90 | top-5 geomean / p90 | same pick |")
    print("|---|---|---|---|")
    for label, r in out.items():
        same = f"{r['same_pick']}/{len(problems)}" if "same_pick" in r else "-"
        print(f"| {label} | {r['top1']['geomean']:.4f} / {r['top1']['p90']:.3f} | "
              f"{r['top5']['geomean']:.4f} / {r['top5']['p90']:.3f} | {same} |")
    times = {}
    if a.time_rows > 0:
        times = forward_ms(model, prefilter, a.time_rows, keeps, max(1, a.repeat))
        print(f"forwards of a cache miss on {a.time_rows} configs, one thread, median thread-CPU ms "
              f"over {a.repeat}: " + ", ".join(f"{k} {v:.3f}" for k, v in times.items()))
        print("ratio to now: " + ", ".join(f"{k} {v / times['now']:.2f}x" for k, v in times.items() if k != "now"))
    misses = {}
    if a.joined:
        joined = load_model_dir(a.joined)
        if joined.prefilter is None:
            raise SystemExit(f"--joined {a.joined}: the model has no pre-filter")
        misses = miss_ms({"without": model, "with pre-filter": joined}, max(1, a.miss_problems), 5)
        print(f"the hook's cache miss on 1,400 configs (Ranker.rank_ktcs), interleaved, {5 * a.miss_problems} "
              "problems each, thread-CPU ms median / p90: "
              + ", ".join(f"{k} {m:.3f} / {p:.3f}" for k, (m, p) in misses.items())
              + f"; ratio {misses['with pre-filter'][0] / misses['without'][0]:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"problems": len(problems), "prefilter": vars(arch), "rows": out,
                       "forward_ms": times, "miss_ms": misses}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
