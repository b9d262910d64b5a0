"""Fidelity of collector v2: its kernels (Inductor's template, runtime sizes) vs the same
configs compiled exactly as Inductor compiles them (static shapes), and the collector's
best vs what torch.compile(mode="max-autotune") picks, all timed the same way in one
process (BatchTimer: cold L2, launches queued behind a GPU spin, GPU time only).

  python bench/collector_fidelity.py --shard shard.msgpack [--top 10] [--budget-s 480] [--json out.json]

Per problem of the shard: its `--top` fastest Triton configs by the collector's record;
each compiled twice in this process (ours via torch_diode.collect.template; Inductor's via
torch.compile max-autotune with a choices hook that keeps exactly that config, Triton
only), then timed interleaved, 5 rounds x 10 repeats each. Reports per-config ratio
ours/Inductor (median, p90 over all configs), whether the best config agrees within 2%
(Inductor's time of our pick <= 1.02 x Inductor's best of the same configs), and
max-autotune DEFAULT's pick / collector's best (best of Triton and ATen, re-timed here).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("TORCH_DIODE_AUTO_INSTALL", "0")


def median(xs):
    return statistics.median(xs)


def p90(xs):
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]


def our_kernel(p, cfg, tensors):
    """The collector's kernel for a recorded config, as a launch function."""
    from torch_diode.collect import template
    params = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k,
              "GROUP_M": cfg.group_m, "num_stages": cfg.num_stages, "num_warps": cfg.num_warps}
    kc = template.kernel_class(p, cfg.even_k)
    grid, args, consts = template.launch_args(kc, p, tensors, params, cfg.allow_tf32)
    kern = template.load(kc)
    return lambda: kern[grid](*args, **consts)


def compile_inductor(p, target_json, inputs, search_space="EXHAUSTIVE", backends="TRITON"):
    """torch.compile'd problem; with target_json, Inductor keeps only that config."""
    import torch
    import torch._dynamo
    from torch._inductor import config

    from torch_diode import inductor_compat as ic
    from torch_diode import wire
    from torch_diode.collect.driver import COMPILE_OPTIONS, inductor_settings_base
    from torch_diode.collect.problems import make_fn
    from torch_diode.collect.records import to_config

    kept = []

    def keep(ktcs, kernel_inputs, op_name):
        if target_json is None:
            return ktcs
        out = [k for k in ktcs if ic.ktc_template_uid(k).startswith("triton") and wire.to_json(
            to_config(ic.ktc_template_uid(k), {**ic.ktc_params(k), **ic.ktc_extra(k)})) == target_json]
        kept.append(len(out))
        return out[:1] or ktcs[:1]

    torch._dynamo.reset()
    settings = {**inductor_settings_base(search_space), "max_autotune_gemm_backends": backends}
    with config.patch(settings), ic.install_choices(ic.make_choices_class(keep)):
        fn = torch.compile(make_fn(p), dynamic=False, fullgraph=True, options=COMPILE_OPTIONS)  # as the collector lowers
        fn(*inputs)
        torch.cuda.synchronize()
    if target_json is not None and (not kept or kept[0] != 1):
        return None
    return lambda: fn(*inputs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shard", required=True)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    import torch

    from torch_diode import wire
    from torch_diode.collect.engine import _aten_fn
    from torch_diode.collect.problems import describe, make_inputs
    from torch_diode.collect.timing import BatchTimer

    t_start = time.perf_counter()
    shard = wire.decode_shard(open(a.shard, "rb").read())
    timer = BatchTimer(0, True)
    rows, problems, inductor_failed = [], [], []
    for i, p in enumerate(shard.problems):
        if time.perf_counter() - t_start > a.budget_s:
            print(f"budget {a.budget_s:.0f} s reached after {i} problems", flush=True)
            break
        recs = [r for r in shard.records if r.problem_index == i and r.status == "ok"]
        tri = sorted((r for r in recs if r.config.is_triton), key=lambda r: r.median_us)[: a.top]
        inputs = make_inputs(p)
        bias, A, B = inputs if len(inputs) == 3 else (None, *inputs)
        shape = (p.batch, p.m, p.n) if p.op in ("bmm", "baddbmm") else (p.m, p.n)
        c = torch.empty(shape, dtype=getattr(torch, p.dtype_out), device="cuda")
        tensors = {"a": A, "b": B, "c": c, "bias": bias}
        pairs = []
        for r in tri:
            cfg = r.config
            ours = our_kernel(p, cfg, tensors)
            try:
                ind = compile_inductor(p, wire.to_json(cfg), inputs)
            except Exception as e:  # e.g. Inductor's static kernel needs more shared memory than ours
                print(f"  {describe(p)}: Inductor failed to compile {cfg}: {str(e).splitlines()[0][:200]}", flush=True)
                inductor_failed.append(wire.to_json(cfg))
                continue
            if ind is None:
                print(f"  {describe(p)}: Inductor did not offer {cfg}; skipped", flush=True)
                continue
            pairs.append((r, ours, ind))
        samples = [([], []) for _ in pairs]
        for _ in range(5):
            for (r, ours, ind), (so, si) in zip(pairs, samples):
                so += timer.repeat(ours, 10)
                si += timer.repeat(ind, 10)
        prob_rows = []
        for (r, _, _), (so, si) in zip(pairs, samples):
            prob_rows.append({"config": wire.to_json(r.config), "collector_recorded_us": r.median_us,
                              "ours_us": median(so) * 1000, "inductor_us": median(si) * 1000,
                              "ratio": median(so) / median(si)})
        rows += prob_rows
        # Best-config agreement among the same configs, both timed by Inductor's kernels.
        agree = None
        if prob_rows:
            our_pick = min(prob_rows, key=lambda x: x["ours_us"])
            ind_best = min(x["inductor_us"] for x in prob_rows)
            agree = our_pick["inductor_us"] <= 1.02 * ind_best
        # Collector's best (Triton or ATen) vs max-autotune DEFAULT's pick, same timer.
        best_rec = min(recs, key=lambda r: r.median_us)
        if best_rec.config.is_triton:
            best_fn = pairs[0][1] if pairs and pairs[0][0] is best_rec else None
            if best_fn is None:
                best_fn = our_kernel(p, best_rec.config, tensors)
        else:
            best_fn = _aten_fn(p, bias, A, B, c)
        t0 = time.perf_counter()
        try:
            mat = compile_inductor(p, None, inputs, "DEFAULT", "TRITON,ATEN")
        except Exception as e:
            print(f"  {describe(p)}: max-autotune failed: {str(e).splitlines()[0][:200]}", flush=True)
            mat = best_fn
        mat_compile = time.perf_counter() - t0
        sb, sm = [], []
        for _ in range(5):
            sb += timer.repeat(best_fn, 10)
            sm += timer.repeat(mat, 10)
        prob = {"problem": describe(p), "configs": len(prob_rows), "best_agrees_2pct": agree,
                "collector_best": best_rec.config.template, "collector_best_us": median(sb) * 1000,
                "maxautotune_default_us": median(sm) * 1000, "maxautotune_over_collector_best": median(sm) / median(sb),
                "maxautotune_compile_s": mat_compile,
                "ratio_median": median([x["ratio"] for x in prob_rows]) if prob_rows else None}
        problems.append(prob)
        print(json.dumps(prob), flush=True)
    ratios = [x["ratio"] for x in rows]
    agreed = [x["best_agrees_2pct"] for x in problems if x["best_agrees_2pct"] is not None]
    mat = [x["maxautotune_over_collector_best"] for x in problems]
    if inductor_failed:
        print(f"{len(inductor_failed)} configs timed by the collector failed to compile in Inductor (static shapes)")
    print(f"\n=== fidelity on {len(problems)} problems, {len(rows)} configs ({torch.cuda.get_device_name()})")
    if ratios:
        print(f"per-config time ratio collector-kernel / Inductor-static: median {median(ratios):.4f}, "
              f"p90 {p90(ratios):.4f}, min {min(ratios):.4f}, max {max(ratios):.4f}")
    if agreed:
        print(f"best config agrees within 2%: {sum(agreed)}/{len(agreed)} problems")
    if mat:
        g = 1.0
        for x in mat:
            g *= x
        print(f"max-autotune DEFAULT pick / collector's best (Triton or ATen): geomean {g ** (1 / len(mat)):.3f}, "
              f"per problem {', '.join(f'{x:.2f}' for x in mat)}")
    if a.json:
        json.dump({"configs": rows, "problems": problems}, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
