#!/usr/bin/env python3
"""Measures the GEMV table of predict mode's reduction candidate (hook/gemv.py) on a GPU,
then checks the hook's use of it on shapes the table does not hold, side by side with
cuBLAS and with coordinate descent.

    PYTHONPATH=python PYTHONUNBUFFERED=1 python3 bench/gemv_reduction.py --out $OUT

Phase 1 (the table; the measurement is the package's `torch_diode.tools.gemv_table`, which
users run as `python -m torch_diode.tools.gemv_table`): for each (dtype, outputs N, K) of
the grid (M = 1, F.linear, the weight's K contiguous: layout "inner"), cuBLAS's GPU time,
then every launch config of CONFIGS compiled through the hook itself (predict mode, a one-entry table naming that
config) and timed. Each shape's config by --rule (RULES; default robust), its time and
cuBLAS's are the table, written as $OUT/<hardware key>.json, the format hook/gemv.py reads
(the other rule's table is timed beside it in phase 2); every config's time
goes to gemv-results.json (so the lookup rule can be judged on the CPU, leave-one-out).
Coordinate descent's own pick is not used: it times with the weight warm in L2 (its
benchmark repeats one call), and on the first H200 run (2026-11-28) its picks lost to
cuBLAS on 8 of 40 grid shapes, where a measured config won on all 40.

Phase 2 (held out): for EVAL shapes, none of them in the grid (among them issue 20's M = 1
workloads l3_gate_m1 and l3_q_m1), and EVAL_BIAS (M = 1 linears with bias: addmm, which
the hook turns into the same reduction with the bias as its epilogue), side by side:
cuBLAS, plain torch.compile, coordinate descent (compile time + GPU time), and
torch_diode predict mode with the phase-1 table of each rule (compile time + GPU time +
whether its reduction kernel carries the fixed config). Results: $OUT/gemv-results.json
and a table on stdout.

--reuse-grid RESULTS_JSON takes the grid shapes an earlier run on this hardware measured
from its gemv-results.json and measures only the others (a wider grid in one device call).

--layout outer measures x @ W with W stored (K, N) (HF GPT-2's Conv1D: addmm(bias, x, W))
instead: CONFIGS_OUTER on a grid without K = 24,576, and the EVAL_OUTER rows. With
--reuse-grid of an inner run the table holds both layouts:
    python3 bench/gemv_reduction.py --layout outer --reuse-grid INNER/gemv-results.json --out $OUT

GPU time: a CUDA graph of one call per weight copy, the copies together 3x the L2 (so the
weight comes from HBM, as in a decode step), timed with CUDA events, median of 15 replays,
divided by the calls in the graph.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from torch_diode.hook import gemv  # noqa: E402  (the format, the lookup distance: one definition)
from torch_diode.tools import gemv_table as gt  # noqa: E402  (the grid, its measurement, the rules: the package's)
from torch_diode.tools.gemv_table import (  # noqa: E402,F401  (names splitk_probe and the tests use from here)
    CONFIGS, CONFIGS_OUTER, DTYPES, GRID_K, RULES, TABLE_GRID_K, TABLE_GRID_N, check, compiled, gpu_us,
    make_inputs, matvec_fn, reused_grid, table_entries)
from stats import geomean  # noqa: E402  (one definition for every bench script)

EVAL = (  # (name, dtype, N, K): none on the grid
    ("l3_gate_m1", "float16", 14336, 4096),
    ("l3_q_m1", "bfloat16", 4096, 4096),
    ("l3_gate_m1_bf16", "bfloat16", 14336, 4096),
    ("l3_q_m1_fp16", "float16", 4096, 4096),
    ("l3_down_m1", "float16", 4096, 14336),
    ("l3_kv_m1", "bfloat16", 1024, 4096),
    ("l2_up_m1", "float16", 11008, 4096),
    ("l70_q_m1", "bfloat16", 8192, 8192),
    ("l70_up_m1", "bfloat16", 28672, 8192),
    ("l70_down_m1", "float16", 8192, 28672),
    ("small_2048", "float16", 2048, 2048),
    ("vit_fc1_m1", "float16", 3072, 768),
)
EVAL_OUTER = (  # (name, dtype, N, K, bias): x @ W with W (K, N), none on the grid; GPT-2's Conv1D has a bias
    ("gpt2_xl_c_attn_m1", "float16", 4800, 1600, True),
    ("gpt2_xl_c_fc_m1", "float16", 6400, 1600, True),
    ("gpt2_xl_mlp_c_proj_m1", "float16", 1600, 6400, True),
    ("gpt2_m_c_attn_m1", "bfloat16", 3072, 1024, True),
    ("xw_gate_m1", "bfloat16", 14336, 4096, False),
    ("xw_q_m1", "float16", 4096, 4096, False),
)
EVAL_BIAS = (  # (name, dtype, N, K): M = 1 linears with bias (addmm), none on the grid
    ("qwen2_7b_q_m1", "bfloat16", 3584, 3584),
    ("qwen2_7b_kv_m1", "bfloat16", 512, 3584),     # N 1.6 octaves under the grid: keeps cuBLAS
    ("gpt2_xl_qkv_m1", "float16", 4800, 1600),
    ("gpt2_xl_fc_m1", "float16", 6400, 1600),
    ("phi2_fc1_m1", "float16", 10240, 2560),
    ("phi2_fc2_m1", "float16", 2560, 10240),
)


def log(*a):
    print(*a, flush=True)


def newest_best_config(cache_dir, since):
    files = [f for f in glob.glob(os.path.join(cache_dir, "**", "*.best_config"), recursive=True)
             if os.path.getmtime(f) >= since]
    if not files:
        return None
    with open(max(files, key=os.path.getmtime)) as f:
        raw = json.load(f)
    r = raw.get("R0_BLOCK", raw.get("RBLOCK"))
    if r is None or "XBLOCK" not in raw:
        return None
    return {"XBLOCK": int(raw["XBLOCK"]), "R0_BLOCK": int(r), "num_warps": int(raw["num_warps"]),
            "num_stages": int(raw.get("num_stages", 1))}


def leave_one_out(grid_rows, rule):
    """Each grid shape's config chosen from the other shapes alone, as the hook would for a
    shape off the grid: (geomean, max) of its measured time over that shape's fastest."""
    rel, _ = gt.rel_times(grid_rows)
    v = [rel[s].get(gt.choose(rel, s, rule, exclude=s), 10.0) for s in rel]
    return geomean(v), max(v)


def one_config_for_all(grid_rows):
    """The single config with the lowest geomean time relative to each shape's fastest over
    the whole grid: (config key, geomean, worst, shapes where it is the fastest)."""
    rel, _ = gt.rel_times(grid_rows)
    keys = sorted(set().union(*rel.values()))
    c = min(keys, key=lambda c: geomean([rel[t].get(c, 10.0) for t in rel]))
    v = [rel[t].get(c, 10.0) for t in rel]
    return c, geomean(v), max(v), sum(x == 1.0 for x in v)


def replay(results_path, out_dir, rule, hardware=None):
    """CPU: the leave-one-out replay of both rules on a measured grid, and the table by `rule`."""
    with open(results_path) as f:
        res = json.load(f)
    grid = res["grid"]
    for r in RULES:
        g, m = leave_one_out(grid, r)
        log(f"leave-one-out, rule {r:8s}: chosen / fastest geomean {g:.3f}, worst {m:.2f} ({len(grid)} shapes)")
    c, g, m, won = one_config_for_all(grid)
    log(f"one config for every shape, {c}: / fastest geomean {g:.3f}, worst {m:.2f}, the fastest on {won}")
    entries = table_entries(grid, rule)
    old = res.get("table") or {}
    table = {"format": gemv.TABLE_FORMAT, "hardware": hardware or res["hardware"],
             "measured": dict(old.get("measured") or {}, rule=f"{rule}: {RULES[rule]}",
                              replayed_from=os.path.basename(results_path)),
             "entries": entries}
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{table['hardware']}.json")
    with open(path, "w") as f:
        json.dump(table, f, indent=1)
    wins = sum(e["reduction_us"] < e["cublas_us"] for e in entries)
    log(f"table by rule {rule}: {len(entries)} entries ({wins} faster than cuBLAS) -> {path}")
    return table


def report(rows, rule):
    """The held-out table and its geomeans (every rule measured), per kind: mm, addmm."""
    others = sorted({k[len("diode_us_"):] for r in rows for k in r if k.startswith("diode_us_")})
    log(f"\n| shape | dtype | bias | cuBLAS us | CD us | diode us ({rule}) | "
        + "".join(f"{o} us | " for o in others) + "diode / cuBLAS | diode / CD | compile diode / plain |")
    log("|---|---|---|---|---|---|" + "---|" * len(others) + "---|---|---|")
    for r in rows:
        log(f"| {r['name']} | {r['dtype']} | {'yes' if r.get('bias') else 'no'} | {r['cublas_us']:.2f} | "
            f"{r['cd_us']:.2f} | {r['diode_us']:.2f} | " + "".join(f"{r['diode_us_' + o]:.2f} | " for o in others)
            + f"{r['diode_us'] / r['cublas_us']:.3f} | {r['diode_us'] / r['cd_us']:.3f} | "
            f"{r['diode_s'] / r['plain_s']:.2f} |")
    for kind, sel in (("mm", [r for r in rows if not r.get("bias")]), ("addmm", [r for r in rows if r.get("bias")])):
        if not sel:
            continue
        log(f"{kind} ({len(sel)}): geomean diode ({rule})/cuBLAS {geomean([r['diode_us'] / r['cublas_us'] for r in sel]):.3f}  "
            + "".join(f"{o}/cuBLAS {geomean([r['diode_us_' + o] / r['cublas_us'] for r in sel]):.3f}  " for o in others)
            + f"diode/CD {geomean([r['diode_us'] / r['cd_us'] for r in sel]):.3f}  "
            f"CD/cuBLAS {geomean([r['cd_us'] / r['cublas_us'] for r in sel]):.3f}  "
            f"compile diode/plain {geomean([r['diode_s'] / r['plain_s'] for r in sel]):.2f}  "
            f"CD/plain {geomean([r['cd_s'] / r['plain_s'] for r in sel]):.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--quick", action="store_true", help="two grid shapes and two eval shapes")
    ap.add_argument("--layout", choices=gemv.LAYOUTS, default="inner",
                    help="the weight's layout to measure: inner = F.linear's (N, K), outer = x @ W with W (K, N); "
                         "with --reuse-grid of the other layout the table holds both")
    ap.add_argument("--rule", choices=sorted(RULES), default="robust",
                    help="how the table picks each shape's config from the measured grid (default robust)")
    ap.add_argument("--reuse-grid", metavar="RESULTS_JSON",
                    help="take the grid shapes this gemv-results.json (same hardware) measured; measure the rest")
    ap.add_argument("--replay", metavar="RESULTS_JSON",
                    help="CPU: no GPU run; the leave-one-out replay of both rules on a gemv-results.json, "
                         "and the table by --rule written to --out")
    a = ap.parse_args()
    if a.replay:
        replay(a.replay, a.out, a.rule)
        return
    os.makedirs(a.out, exist_ok=True)
    cache = gt.fresh_caches()
    import torch
    from torch._inductor import config
    config.fx_graph_cache = False
    t_start = time.monotonic()

    def left():
        return a.budget_s - (time.monotonic() - t_start)

    # What this torch offers the hook (2.11 on the GPU machine, 2.13 here)
    from torch._inductor import choices as ch, decomposition as d
    api = {"torch": torch.__version__, "triton_kernel_kwargs": hasattr(ch.InductorChoices, "triton_kernel_kwargs"),
           "mm_decomposition": torch.ops.aten.mm.default in d.decompositions,
           "fast_random_decomps_cache": hasattr(getattr(d, "fast_random_decomps", None), "cache_clear")}
    try:
        from torch._inductor.codegen.triton import FixedTritonConfig  # noqa: F401
        api["FixedTritonConfig"] = True
    except ImportError:
        api["FixedTritonConfig"] = False
    log("api:", json.dumps(api))
    import torch_diode  # noqa: E402  (installs the hook: uninstalled below for the plain runs)
    hw_key = torch_diode.get_detected_hardware()["hardware_key"]
    log("hardware:", hw_key, torch.cuda.get_device_name(0))

    torch_diode.uninstall()

    from hook_end_to_end import plain_model_copy, shipped_model_dir
    shipped = shipped_model_dir(hw_key)
    model = plain_model_copy(shipped, cache) if shipped else None
    log("model:", shipped)

    hook = gt.HookWithOneConfig(hw_key, cache, model)   # installs the hook with a given table
    grid = gt.grid_shapes(a.layout)
    configs = gt.LAYOUT_CONFIGS[a.layout]
    evals = ([e + (False,) for e in EVAL] + [e + (True,) for e in EVAL_BIAS] if a.layout == "inner"
             else list(EVAL_OUTER))
    if a.quick:
        grid, evals, configs = grid[:2], evals[:2] + evals[-1:], configs[:3]
    rows, grid_rows = [], reused_grid(a.reuse_grid, hw_key) if a.reuse_grid else []
    grid_rows += gt.measure_grid(torch, grid, a.layout, configs, hook, left, grid_rows, log=log)
    measured = gt.measured_block(torch, "bench/gemv_reduction.py", configs, sys.argv[1:], grid_rows, a.reuse_grid)
    tables, table_paths = {}, {}
    for rule in sorted(RULES, key=lambda r: r != a.rule):    # a.rule's table is $OUT/<hw>.json
        tables[rule] = gt.table_doc(hw_key, grid_rows, rule, measured)
        name = f"{hw_key}.json" if rule == a.rule else f"{hw_key}.{rule}.json"
        table_paths[rule] = os.path.join(a.out if rule == a.rule else cache, name)
        with open(table_paths[rule], "w") as f:
            json.dump(tables[rule], f, indent=1)
    table = tables[a.rule]
    log(f"table: {len(table['entries'])} entries (rule {a.rule}) -> {table_paths[a.rule]}")
    with open(os.path.join(a.out, "gemv-results.json"), "w") as f:   # again at the end, with the eval
        json.dump({"hardware": hw_key, "grid": grid_rows}, f, indent=1)

    for name, dt, n, k, bias in evals:
        if left() < 25:
            log(f"budget: eval stops before {name}")
            break
        dtype = getattr(torch, dt)
        x, ws = make_inputs(torch, dtype, n, k, a.layout)
        # with bias: aten.addmm, which the hook makes the same reduction plus the bias
        fn = matvec_fn(torch, a.layout, torch.randn(n, device="cuda", dtype=dtype) if bias else None)
        ref = fn(x, ws[0])
        row = {"name": name, "dtype": dt, "layout": a.layout, "n": n, "k": k, "bias": bias,
               "cublas_us": gpu_us(torch, fn, x, ws)}
        torch_diode.uninstall()
        c, row["plain_s"], _ = compiled(torch, fn, x, ws[0])
        row["plain_us"] = gpu_us(torch, c, x, ws)
        since = time.time() - 1
        c, row["cd_s"], _ = compiled(torch, fn, x, ws[0], coordinate_descent_tuning=True)
        row["cd_us"] = gpu_us(torch, c, x, ws)
        row["cd_config"] = newest_best_config(cache, since)
        for rule, path in table_paths.items():
            hook.install(path)
            c, comp_s, code = compiled(torch, fn, x, ws[0], max_autotune_gemm=True)
            sfx = "" if rule == a.rule else f"_{rule}"
            row["diode_s" + sfx], row["diode_us" + sfx] = comp_s, gpu_us(torch, c, x, ws)
            row["diode_fixed_config" + sfx] = "fixed_config(" in code
            row["diode_gemv" + sfx] = torch_diode.get_prediction_stats().get("gemv")
            row["diode_err" + sfx] = check(ref, c(x, ws[0]))
            torch_diode.uninstall()
        rows.append(row)
        others = " ".join(f"{r} {row['diode_us_' + r]:7.2f}" for r in table_paths if r != a.rule)
        log(f"eval {name:16s} {dt:8s} N={n:6d} K={k:6d} bias={int(bias)} cublas {row['cublas_us']:7.2f} "
            f"plain {row['plain_us']:7.2f} CD {row['cd_us']:7.2f} ({row['cd_s']:.1f} s) diode {row['diode_us']:7.2f} "
            f"({row['diode_s']:.1f} s; {others}) fixed={row['diode_fixed_config']} gemv={row['diode_gemv']} "
            f"err {row['diode_err']:.1e}")
        del x, ws, c
    res = {"api": api, "hardware": hw_key, "gpu": torch.cuda.get_device_name(0), "model": shipped,
           "table": table, "grid": grid_rows, "eval": rows}
    with open(os.path.join(a.out, "gemv-results.json"), "w") as f:
        json.dump(res, f, indent=1)
    if rows:
        report(rows, a.rule)


if __name__ == "__main__":
    main()
