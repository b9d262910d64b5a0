#!/usr/bin/env python3
"""Ranking time of the hook on a busy machine: the model's forwards on one intra-op thread
(what the hook does: ranking._OneIntraOpThread) against torch's default thread count,
side by side in one process (issue 20's compile lines).

torch.compile ranks while Inductor's compile workers keep the cores busy; --load N starts N
busy-looping processes on this process's cores to stand in for them. Each variant ranks the
same problems (Inductor's DEFAULT triton::mm list, predict mode) with a fresh Ranker, after
one untimed ranking (thread pools started), and the script prints each variant's median
milliseconds per ranking and their ratio.

    python3 bench/hook_rank_threads.py [--model DIR] [--load N] [--threads K] [--reps R] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, HERE)

from hook_end_to_end import MmKtc, shipped_model_dir  # noqa: E402  (one definition each)

PROBLEMS = [(4096, 4096, 8192), (2048, 4096, 4096), (16, 14336, 4096), (8, 4096, 4096),
            (4096, 1024, 4096), (512, 512, 512), (1024, 3072, 768)]


def rank_times(model, cases, reps: int, one_thread: bool) -> list[float]:
    """Milliseconds per ranking of every case, reps times, with a fresh Ranker; with
    one_thread False the hook's one-thread context is switched off (torch's own count)."""
    from torch_diode.hook import ranking
    ctx = ranking._OneIntraOpThread
    saved = ctx.__enter__, ctx.__exit__
    if not one_thread:
        ctx.__enter__, ctx.__exit__ = (lambda self: self), (lambda self, *exc: False)
    try:
        out = []
        for _ in range(reps):
            r = ranking.Ranker(model)   # empty prediction cache: every ranking forwards
            for p, configs in cases:
                t0 = time.perf_counter()
                r.rank(p, configs, ranking.Options(mode="predict"))
                out.append((time.perf_counter() - t0) * 1e3)
        return out
    finally:
        ctx.__enter__, ctx.__exit__ = saved


def busy(n: int) -> list:
    """n busy-looping processes on this process's cores (inherited affinity)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model or bundle directory (default: the newest shipped H200 bundle)")
    ap.add_argument("--load", type=int, default=0, help="busy processes beside the ranking (default 0)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads of the default variant (0: torch's own)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", help="write the figures as JSON here too")
    a = ap.parse_args(argv)
    import torch

    from torch_diode.collect.enumerate import mm_configs
    from torch_diode.hook import extract
    from torch_diode.model import load_model_dir
    from torch_diode.wire import Problem
    if a.threads:
        torch.set_num_threads(a.threads)
    model_dir = a.model or shipped_model_dir("nvidia-h200-144gb")
    if not model_dir:
        ap.error("no shipped nvidia-h200-144gb bundle: give --model")
    model = load_model_dir(model_dir)
    cases = []
    for m, n, k in PROBLEMS:
        p = Problem(op="mm", m=m, n=n, k=k, dtype_a="float16", dtype_b="float16", dtype_out="float16")
        cases.append((p, [extract.config_from_ktc(MmKtc(c)) for c in mm_configs(m, n, k, 2, "DEFAULT")]))
    procs = busy(a.load)
    try:
        time.sleep(0.5 if procs else 0)
        rank_times(model, cases[:1], 1, one_thread=False)   # thread pools started, untimed
        many = rank_times(model, cases, a.reps, one_thread=False)
        one = rank_times(model, cases, a.reps, one_thread=True)
    finally:
        for p in procs:
            p.kill()
    res = {"torch_threads": torch.get_num_threads(), "cores": len(os.sched_getaffinity(0)), "load": a.load,
           "rankings": len(one), "configs": [len(c) for _, c in cases],
           "default_threads_ms_median": statistics.median(many), "one_thread_ms_median": statistics.median(one),
           "default_threads_ms_max": max(many), "one_thread_ms_max": max(one)}
    res["ratio_default_over_one"] = res["default_threads_ms_median"] / res["one_thread_ms_median"]
    print(f"{res['rankings']} rankings each, {res['cores']} cores, {a.load} busy processes: "
          f"{res['torch_threads']} threads {res['default_threads_ms_median']:.2f} ms median, "
          f"one thread {res['one_thread_ms_median']:.2f} ms median: ratio {res['ratio_default_over_one']:.1f}x")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
