"""Ranking speed of the Inductor hook (issue 19): old path vs new, one CPU core.

The candidate list is Inductor's own EXHAUSTIVE mm space for H100 (torch_diode.collect.
enumerate runs CUDAConfigHeuristic on CPU: 1,400 configs for fp16), as real
KernelTemplateChoices built by Inductor's make_ktc_generator (DictKernelTemplateParams,
shared extra_kwargs; a stand-in template object). The model has the trained
architecture (hidden 64, 2 blocks, SiLU, docs/model-format.md) with random weights:
speed does not depend on the weights.

Times, per problem, the whole ranking path of the hook (reading the KTCs, prediction-cache
lookup, features, forward, top-k/threshold selection, margin) of
  old: extract.config_from_ktc + hook.ranking.ReferenceRanker (KernelConfig per KTC,
       features.py per config, Python sort: the path before issue 19)
  new: hook.ranking.Ranker.rank_ktcs (each KTC's kwargs values, read from the params' dict
       without to_kwargs(), lead to its table row; standardised
       feature columns cached per config and gathered with numpy, one batched forward,
       argsort)
  topk: new plus the op's ATen config scored in the same forward
       (rank_ktcs(extra_keys=...)), what top-k mode runs for its ATen shortcut
       (Options.aten_shortcut, docs/hook.md)
for three cases:
  cold   the first problem of the process (nothing cached, first forward of the module)
  miss   a new problem later on (prediction-cache miss: features + forward + select)
  hit    the same problem again (prediction-cache hit)
and checks that all three return exactly the same scores, kept indices and margin.

    PYTHONPATH=python python bench/hook_rank_speed.py [--problems 20] [--repeat 5] [--model DIR] [--fresh]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

from torch_diode.collect.enumerate import mm_configs  # noqa: E402
from torch_diode.hook import extract  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker, ReferenceRanker, config_key  # noqa: E402
from torch_diode.model import load_model_dir  # noqa: E402
from torch_diode.wire import KernelConfig, Problem  # noqa: E402


_wall = time.perf_counter


class _Template:
    uid = "triton::mm"


def candidate_list(dtype_bytes: int = 2) -> list:
    """Inductor's EXHAUSTIVE triton::mm configs for H100 as real KernelTemplateChoices:
    Inductor's own make_ktc_generator (what InductorChoices.get_ktc returns) over the
    configs, so each carries a DictKernelTemplateParams and the template's shared
    extra_kwargs, as the hook sees them (a stand-in template: no layout / inputs on CPU)."""
    from torch._inductor.kernel_template_choice import make_ktc_generator
    from torch._inductor.template_heuristics.params import DictKernelTemplateParams
    kws = mm_configs(4096, 4096, 4096, dtype_bytes, "EXHAUSTIVE")
    return list(make_ktc_generator(_Template(), (DictKernelTemplateParams(kw) for kw in kws),
                                   {"ALLOW_TF32": False}, {}, None, None))


def problems(n: int, seed: int = 0) -> list[Problem]:
    rng = random.Random(seed)
    dims = [64, 128, 256, 384, 512, 768, 1000, 1024, 2048, 3072, 4096, 8192]
    out = []
    for i in range(n):
        dt = rng.choice(["float16", "bfloat16", "float32"])
        op = rng.choice(["mm", "addmm", "bmm"])
        out.append(Problem(op=op, batch=rng.choice([2, 8, 32]) if op == "bmm" else 1, m=rng.choice(dims),
                           n=rng.choice(dims), k=rng.choice(dims), dtype_a=dt, dtype_b=dt, dtype_out=dt,
                           trans_b=rng.random() < 0.5, bias="row" if op == "addmm" else "none"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5, help="rounds, each with fresh rankers")
    ap.add_argument("--clock", default="cpu,wall", help="cpu (thread CPU time), wall, or both")
    ap.add_argument("--hidden", type=int, default=64, help="model width (the trainer's default: 64)")
    ap.add_argument("--blocks", type=int, default=2, help="residual blocks (the trainer's default: 2)")
    ap.add_argument("--fresh", action="store_true",
                    help="new KernelTemplateChoice objects (and kwargs dicts) for every problem, as Inductor "
                         "builds them per GEMM, instead of one list offered again and again")
    ap.add_argument("--model", help="a model directory to time instead of random weights of --hidden x "
                                    "--blocks, e.g. an ensemble (docs/model-format.md, Members)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.model:
        model = load_model_dir(args.model)
        arch = model.info.architecture
        args.hidden, args.blocks = arch.hidden, arch.blocks
    else:
        from test_hook_model import write_model_dir
        tmp = tempfile.mkdtemp()
        model = load_model_dir(write_model_dir(os.path.join(tmp, "m"), hidden=args.hidden, blocks=args.blocks,
                                               activation="silu"))
    configs = candidate_list()
    probs = problems(args.problems)
    # per problem: the same list (default) or an equal list of new objects (--fresh)
    lists = [candidate_list() for _ in probs] if args.fresh else [configs] * len(probs)
    opts = Options()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {len(configs)} configs "
          f"(Inductor EXHAUSTIVE mm, fp16), {len(probs)} problems, model hidden {args.hidden} x {args.blocks} blocks"
          + (f", {args.model}" if args.model else "") + (", new KTC objects per problem" if args.fresh else ""))

    for clock in args.clock.split(","):
        ok = measure(model, lists, probs, opts, args.repeat, clock)
        if not ok:
            sys.exit(1)


def measure(model, lists, probs, opts, repeat, clock) -> bool:
    # Both rankers read time.perf_counter: with --clock cpu it is this thread's CPU time,
    # which leaves out the time the (shared, busy) machine ran other processes.
    time.perf_counter = time.thread_time if clock == "cpu" else _wall
    paths = ("old", "new", "topk")
    t = {(w, c): [] for w in paths for c in ("cold", "miss", "hit")}
    br = {(w, c): {} for w in paths for c in ("cold", "miss", "hit")}
    aten = [config_key(KernelConfig(template="aten"))]
    mismatches = 0

    def add(w, c, total, parts):
        t[(w, c)].append(total)
        for k, v in parts.items():
            br[(w, c)].setdefault(k, []).append(v)

    for rep in range(repeat):
        # each path ranks every problem in turn (as the hook would, warm CPU caches),
        # the results are compared afterwards
        old, new, topk = ReferenceRanker(model), Ranker(model), Ranker(model)
        extract._KEY_CACHE.clear()  # as in a fresh process: `cold` builds every config key
        got = {"old": [], "new": [], "topk": []}
        for i, p in enumerate(probs):
            for case in (("cold" if i == 0 else "miss"), "hit"):
                t0 = time.perf_counter()
                cfgs = [extract.config_from_ktc(k) for k in lists[i]]  # the old handler's extraction
                t1 = time.perf_counter()
                s_old, k_old, m_old = old.rank(p, cfgs, opts)
                add("old", case, time.perf_counter() - t0, {**old.last_breakdown, "extract": t1 - t0})
                got["old"].append((s_old, k_old, m_old))
        for w, ranker, extra in (("new", new, ()), ("topk", topk, aten)):
            extract._KEY_CACHE.clear()  # each path's `cold` builds every config key (old's uses none)
            for i, p in enumerate(probs):
                for case in (("cold" if i == 0 else "miss"), "hit"):
                    r = ranker.rank_ktcs(p, lists[i], opts, extra_keys=extra)  # the handler: reads the KTCs too
                    add(w, case, r.breakdown["total"], r.breakdown)
                    assert r.cache_hit == (case == "hit") and len(extra) == (0 if r.extra_scores is None
                                                                            else len(r.extra_scores))
                    got[w].append((r.scores.tolist(), r.kept, r.margin))
            if w == "topk" and model.others:
                # An ensemble's ATen extra is a candidate of its cascade (docs/model-format.md,
                # Members), so member 0's best that the other members score may differ by one
                # from the old path's, which ranks the Triton configs alone: not comparable.
                continue
            mismatches += sum(a != b for a, b in zip(got["old"], got[w]))

    def ms(v):
        return statistics.median(v) * 1e3

    print(f"\nclock: {'thread CPU time' if clock == 'cpu' else 'wall'}")
    print(f"{'case':<6} {'path':<4} {'total ms':>9} {'extract':>8} {'keys':>7} {'features':>9} {'forward':>8} "
          f"{'select':>7}   old/new")
    for case in ("cold", "miss", "hit"):
        for w in paths:
            b = br[(w, case)]
            ratio = ms(t[("old", case)]) / ms(t[(w, case)]) if w != "old" else None
            print(f"{case:<6} {w:<4} {ms(t[(w, case)]):9.3f} {ms(b.get('extract', [0])):8.3f} "
                  f"{ms(b.get('keys', [0])):7.3f} "
                  f"{ms(b.get('features', [0])):9.3f} {ms(b.get('forward', [0])):8.3f} "
                  f"{ms(b.get('select', [0])):7.3f}   {'' if ratio is None else f'{ratio:.1f}x'}")
    n = repeat * len(probs) * 2 * (1 if model.others else 2)
    print(f"medians over {repeat} rounds ({repeat} cold, {repeat * (len(probs) - 1)} miss, "
          f"{repeat * len(probs)} hit rankings); identical scores, ranking and margin: "
          f"{n - mismatches}/{n}")
    for w in ("new", "topk"):
        miss = sorted(t[(w, "miss")])
        print(f"{w} path, cache miss: median {ms(miss):.3f} ms, p90 {miss[int(0.9 * (len(miss) - 1))] * 1e3:.3f} ms, "
              f"max {miss[-1] * 1e3:.3f} ms (goal <= 2 ms)")
    return not mismatches


if __name__ == "__main__":
    main()
