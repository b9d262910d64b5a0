#!/usr/bin/env python3
"""The hook's ranking at two revisions, side by side in one process (issue 19's 2 ms).

The package as committed at --base (extracted with `git archive` and imported as
`torch_diode_base`) against the working tree's, alternating problem by problem on one core
(thread CPU time), so that both see the same machine load: this VM's run-to-run spread is as
large as the effects measured (bench/RESULTS.md). Each problem is a prediction-cache miss on
Inductor's EXHAUSTIVE mm list for H100 (bench/hook_rank_speed.py's candidate_list, fresh
KernelTemplateChoice objects per problem with --fresh, as Inductor builds them per GEMM), then
the same problem again (a hit). Every pair must return the same scores, kept indices and margin
when both sides rank the same model (the mismatch count is printed; with --base-model the
models differ and only the times compare).

    PYTHONPATH=python taskset -c 1 .venv/bin/python bench/hook_rank_ab.py --base REV \
        --model python/torch_diode/bundles/nvidia-h200-144gb/8 [--base-model DIR] [--problems 150]

The forward time is the model modules' own (their forward wrapped and timed); "non-forward" is
the rest of the miss: reading the KTCs, table rows, features, selection.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)


def extract_base(rev: str, dest: str) -> None:
    """python/torch_diode at `rev` as dest/torch_diode_base (its imports are relative)."""
    archive = os.path.join(dest, "base.tar")
    with open(archive, "wb") as f:
        r = subprocess.run(["git", "-C", ROOT, "archive", rev, "python/torch_diode"], stdout=f,
                           stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"hook_rank_ab: cannot take python/torch_diode at {rev!r}: {r.stderr.strip()}")
    with tarfile.open(archive) as t:
        t.extractall(dest, filter="data")
    shutil.move(os.path.join(dest, "python", "torch_diode"), os.path.join(dest, "torch_diode_base"))


def q(v: list[float], f: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(f * len(v)))] * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="git revision of the base package")
    ap.add_argument("--model", required=True, help="model or bundle directory the working tree ranks with")
    ap.add_argument("--base-model", help="the base's model (default: --model)")
    ap.add_argument("--problems", type=int, default=150)
    ap.add_argument("--fresh", type=int, default=1, help="1: new KTC objects per problem (default)")
    ap.add_argument("--seed", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="diode_ab_")
    try:
        extract_base(a.base, tmp)
        sys.path.insert(0, tmp)
        import torch
        torch.set_num_threads(1)
        import torch_diode.hook.ranking as new_ranking
        import torch_diode.model as new_model
        import torch_diode_base.hook.ranking as base_ranking
        import torch_diode_base.model as base_model
        from hook_rank_speed import candidate_list, problems

        models = {"new": new_model.load_model_dir(a.model),
                  "base": base_model.load_model_dir(a.base_model or a.model)}
        fwd = {"s": 0.0}

        def timed(mod):
            f = mod.forward

            def g(*x):
                t0 = time.thread_time()
                v = f(*x)
                fwd["s"] += time.thread_time() - t0
                return v
            mod.forward = g

        for m in models.values():
            for mod in (m.module, getattr(m, "stacked_others", None), getattr(m, "prefilter", None)):
                if mod is not None:
                    timed(mod)
        rankers = {"new": (new_ranking.Ranker(models["new"]), new_ranking.Options()),
                   "base": (base_ranking.Ranker(models["base"]), base_ranking.Options())}
        ktcs0 = candidate_list()
        probs = problems(a.problems + 3, seed=a.seed)
        for p in probs[:3]:   # warm: first forwards, the config table
            for r, o in rankers.values():
                r.rank_ktcs(p, ktcs0, o)
        t = {f"{s}_{k}": [] for s in ("base", "new") for k in ("miss", "hit", "fwd", "nonfwd")}
        mismatches = 0
        for i, p in enumerate(probs[3:]):
            ktcs = candidate_list() if a.fresh else ktcs0
            order = ("base", "new") if i % 2 == 0 else ("new", "base")
            out = {}
            for side in order:
                r, o = rankers[side]
                fwd["s"] = 0.0
                t0 = time.thread_time()
                x = r.rank_ktcs(p, ktcs, o)
                t1 = time.thread_time()
                f = fwd["s"]
                y = r.rank_ktcs(p, ktcs, o)
                t2 = time.thread_time()
                if x.cache_hit or not y.cache_hit:
                    raise SystemExit("expected a miss then a hit")
                t[f"{side}_miss"].append(t1 - t0)
                t[f"{side}_hit"].append(t2 - t1)
                t[f"{side}_fwd"].append(f)
                t[f"{side}_nonfwd"].append(t1 - t0 - f)
                out[side] = (x.scores.tobytes(), x.kept, x.margin)
            mismatches += out["base"] != out["new"]
        same = not a.base_model or os.path.realpath(a.base_model) == os.path.realpath(a.model)
        print(f"base {a.base} ({a.base_model or a.model}) vs working tree ({a.model}); {len(t['new_miss'])} "
              f"problems, fresh KTCs {bool(a.fresh)}; thread CPU time, ms")
        print(f"results differ on {mismatches} problems" + ("" if same else " (different models: expected)"))
        print("| | base median (p10-p90) | new median (p10-p90) | paired base - new, median |")
        print("|---|---|---|---|")
        for k in ("miss", "fwd", "nonfwd", "hit"):
            b, n = t[f"base_{k}"], t[f"new_{k}"]
            d = [x - y for x, y in zip(b, n)]
            print(f"| {k} | {statistics.median(b) * 1e3:.3f} ({q(b, .1):.3f}-{q(b, .9):.3f}) | "
                  f"{statistics.median(n) * 1e3:.3f} ({q(n, .1):.3f}-{q(n, .9):.3f}) | {statistics.median(d) * 1e3:.3f} |")
        return 1 if same and mismatches else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
