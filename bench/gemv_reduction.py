#!/usr/bin/env python3
"""Measures the GEMV table of predict mode's reduction candidate (hook/gemv.py) on a GPU,
then checks the hook's use of it on shapes the table does not hold, side by side with
cuBLAS and with coordinate descent.

    PYTHONPATH=python PYTHONUNBUFFERED=1 python3 bench/gemv_reduction.py --out $OUT

Phase 1 (the table): for each (dtype, outputs N, K) of TABLE_GRID (M = 1, F.linear, the
weight's K contiguous: layout "inner"), cuBLAS's GPU time, then every launch config of
CONFIGS compiled through the hook itself (predict mode, a one-entry table naming that
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
import math
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from torch_diode.hook import gemv  # noqa: E402  (the format, the lookup distance: one definition)
from stats import geomean  # noqa: E402  (one definition for every bench script)

TABLE_GRID_N = (1536, 3072, 6144, 12288, 24576)
# K 24,576 since the first run's table (which stops at 12,288, so K = 28,672 kept cuBLAS)
TABLE_GRID_K = (1536, 3072, 6144, 12288, 24576)
DTYPES = ("float16", "bfloat16")
# The launch configs coordinate descent chose on the first H200 run (XBLOCK 1-4, R0_BLOCK
# 512-4096, 4-16 warps, one stage), as a grid.
CONFIGS = tuple({"XBLOCK": x, "R0_BLOCK": r, "num_warps": w, "num_stages": 1}
                for x in (1, 2, 4) for r in (1024, 2048, 4096) for w in (8, 16)) + (
    {"XBLOCK": 1, "R0_BLOCK": 512, "num_warps": 4, "num_stages": 1},
    {"XBLOCK": 1, "R0_BLOCK": 512, "num_warps": 8, "num_stages": 1},
    {"XBLOCK": 4, "R0_BLOCK": 1024, "num_warps": 4, "num_stages": 1},
    {"XBLOCK": 1, "R0_BLOCK": 4096, "num_warps": 4, "num_stages": 1})
# Layout "outer" (x @ W with W stored (K, N), as HF GPT-2's Conv1D): the reduction runs across
# rows, so many outputs per program and a short R0_BLOCK, around Inductor's own outer-reduction
# heuristic (XBLOCK 16-64, R0_BLOCK 8-64: runtime/triton_heuristics.py, outer_config_opt).
CONFIGS_OUTER = tuple({"XBLOCK": x, "R0_BLOCK": r, "num_warps": 4 if x * r <= 1024 else 8, "num_stages": 1}
                      for x in (16, 32, 64, 128) for r in (8, 16, 32, 64) if x * r <= 4096) + (
    {"XBLOCK": 16, "R0_BLOCK": 32, "num_warps": 8, "num_stages": 1},
    {"XBLOCK": 32, "R0_BLOCK": 32, "num_warps": 8, "num_stages": 1},
    {"XBLOCK": 64, "R0_BLOCK": 16, "num_warps": 8, "num_stages": 1},
    {"XBLOCK": 8, "R0_BLOCK": 64, "num_warps": 4, "num_stages": 1},
    {"XBLOCK": 128, "R0_BLOCK": 8, "num_warps": 8, "num_stages": 1})
GRID_K = {"inner": TABLE_GRID_K, "outer": TABLE_GRID_K[:-1]}    # outer: one call's worth of compiles
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


def make_inputs(torch, dtype, n, k, layout="inner", m=1):
    """x (M, K) and weight copies together 3x the L2: (N, K) for F.linear ("inner"), (K, N)
    for x @ W ("outer")."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    wbytes = n * k * torch.tensor([], dtype=dtype).element_size()
    copies = max(2, min(64, math.ceil(3 * l2 / wbytes)))
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    shape = (n, k) if layout == "inner" else (k, n)
    ws = [torch.randn(*shape, device="cuda", dtype=dtype) / math.sqrt(k) for _ in range(copies)]
    return x, ws


def matvec_fn(torch, layout, bias=None):
    """The M = 1 GEMM of a layout: F.linear(x, w[, bias]) (mm / addmm with W^T), or x @ w /
    addmm(bias, x, w) with W stored (K, N)."""
    import torch.nn.functional as F
    if layout == "inner":
        return (lambda x, w: F.linear(x, w)) if bias is None else (lambda x, w: F.linear(x, w, bias))
    return (lambda x, w: x @ w) if bias is None else (lambda x, w: torch.addmm(bias, x, w))


def gpu_us(torch, fn, x, ws, reps=15):
    for w in ws:
        fn(x, w)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for w in ws:
            fn(x, w)
    g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1000.0 / len(ws))
    return statistics.median(out)


def compiled(torch, fn, x, w, **patches):
    """torch.compile(fn) under config patches; returns (compiled fn, first-call seconds, code)."""
    import torch._dynamo
    from torch._inductor import config
    from torch._inductor.utils import run_and_get_code
    torch._dynamo.reset()
    with config.patch(**patches):
        c = torch.compile(fn)
        t0 = time.perf_counter()
        _, code = run_and_get_code(c, x, w)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    return c, dt, "\n".join(code)


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


def check(ref, got):
    """Relative error of `got` against `ref` (the eager call)."""
    return float((got.float() - ref.float()).norm() / ref.float().norm())


RULES = {
    "fastest": "each shape's own fastest config",
    "robust": "each shape's config is the one with the lowest geomean time relative to the fastest over the "
              "grid shapes of its dtype and layout within one octave (log2 distance <= 1), itself included",
}


def _shape(r):
    """A grid row's (dtype, n, k, layout); rows from before the layout was recorded are "inner"."""
    return r["dtype"], r["n"], r["k"], r.get("layout", "inner")


def _rel_times(grid_rows):
    """(dtype, n, k, layout) -> {config key: time / that shape's fastest}, and -> {key: us}."""
    rel, us = {}, {}
    for r in grid_rows:
        if not r["configs"]:
            continue
        best = min(c["us"] for c in r["configs"])
        shape = _shape(r)
        us[shape] = {json.dumps(c["config"], sort_keys=True): c["us"] for c in r["configs"]}
        rel[shape] = {key: t / best for key, t in us[shape].items()}
    return rel, us


def _dist(a, b):
    """gemv.log2_distance of two (dtype, n, k, layout) shapes."""
    return gemv.log2_distance(a[1], a[2], b[1], b[2])


def _choose(rel, shape, rule, exclude=None):
    """The config key the rule gives `shape`, from the grid shapes other than `exclude`."""
    pool = [t for t in rel if t != exclude and t[0] == shape[0] and t[3] == shape[3]]
    if rule == "fastest":
        if exclude is None:
            return min(rel[shape], key=rel[shape].get)
        near = min(pool, key=lambda t: (_dist(shape, t), t[1], t[2]))   # hook/gemv.py's nearest entry
        return min(rel[near], key=rel[near].get)
    near = [t for t in pool if _dist(shape, t) <= gemv.MAX_LOG2_DISTANCE] or pool
    keys = set().union(*(rel[t] for t in near))
    return min(sorted(keys), key=lambda c: geomean([rel[t].get(c, 10.0) for t in near]))


def table_entries(grid_rows, rule):
    """The GEMV table's entries from the measured grid, by `rule` (RULES). An entry's
    reduction_us is its config's measured time at that shape."""
    rel, us = _rel_times(grid_rows)
    cublas = {_shape(r): r["cublas_us"] for r in grid_rows}
    out = []
    for shape in rel:
        c = _choose(rel, shape, rule)
        out.append({"dtype": shape[0], "layout": shape[3], "n": shape[1], "k": shape[2], "config": json.loads(c),
                    "reduction_us": round(us[shape][c], 3), "cublas_us": round(cublas[shape], 3)})
    return out


def leave_one_out(grid_rows, rule):
    """Each grid shape's config chosen from the other shapes alone, as the hook would for a
    shape off the grid: (geomean, max) of its measured time over that shape's fastest."""
    rel, _ = _rel_times(grid_rows)
    v = [rel[s].get(_choose(rel, s, rule, exclude=s), 10.0) for s in rel]
    return geomean(v), max(v)


def one_config_for_all(grid_rows):
    """The single config with the lowest geomean time relative to each shape's fastest over
    the whole grid: (config key, geomean, worst, shapes where it is the fastest)."""
    rel, _ = _rel_times(grid_rows)
    keys = sorted(set().union(*rel.values()))
    c = min(keys, key=lambda c: geomean([rel[t].get(c, 10.0) for t in rel]))
    v = [rel[t].get(c, 10.0) for t in rel]
    return c, geomean(v), max(v), sum(x == 1.0 for x in v)


def reused_grid(results_path, hardware):
    """The grid rows of an earlier run's gemv-results.json; refused when measured on other hardware."""
    with open(results_path) as f:
        res = json.load(f)
    if res.get("hardware") != hardware:
        raise SystemExit(f"--reuse-grid {results_path}: measured on {res.get('hardware')}, not {hardware}")
    return [dict(r, reused_from=os.path.basename(os.path.dirname(os.path.abspath(results_path))))
            for r in res["grid"]]


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
    cache = tempfile.mkdtemp(prefix="gemv-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(cache, "triton"))
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

    linear = matvec_fn(torch, a.layout)

    from hook_end_to_end import plain_model_copy, shipped_model_dir
    shipped = shipped_model_dir(hw_key)
    model = plain_model_copy(shipped, cache) if shipped else None
    log("model:", shipped)

    def one_entry_table(dt, n, k, cfg, layout=a.layout):
        """Compile through the hook with exactly this config: a one-entry table."""
        path = os.path.join(cache, "one-entry.json")
        with open(path, "w") as f:
            json.dump({"format": gemv.TABLE_FORMAT, "hardware": hw_key, "measured": {"bench": "grid"},
                       "entries": [{"dtype": dt, "layout": layout, "n": n, "k": k, "config": cfg,
                                    "reduction_us": 1.0, "cublas_us": 1000.0}]}, f)
        return path

    def install(table_path):
        os.environ["TORCH_DIODE_GEMV_TABLE"] = table_path
        gemv._tables.clear()
        torch_diode.install(model, mode="predict", force=True)
        torch_diode.reset_prediction_stats()

    grid = [(dt, n, k) for dt in DTYPES for n in TABLE_GRID_N for k in GRID_K[a.layout]]
    if a.layout == "inner":
        evals, configs = [e + (False,) for e in EVAL] + [e + (True,) for e in EVAL_BIAS], CONFIGS
    else:
        evals, configs = list(EVAL_OUTER), CONFIGS_OUTER
    if a.quick:
        grid, evals, configs = grid[:2], evals[:2] + evals[-1:], configs[:3]
    rows, grid_rows = [], reused_grid(a.reuse_grid, hw_key) if a.reuse_grid else []
    reused = len(grid_rows)
    done = {_shape(r) for r in grid_rows}
    log(f"grid: {len(grid_rows)} shapes reused, {sum(g not in done for g in grid)} to measure")
    for dt, n, k in grid:
        if (dt, n, k, a.layout) in done:
            continue
        if left() < 120:
            log(f"budget: grid stops before {dt} {n}x{k}")
            break
        dtype = getattr(torch, dt)
        x, ws = make_inputs(torch, dtype, n, k, a.layout)
        ref = linear(x, ws[0])
        cublas = gpu_us(torch, linear, x, ws)
        times, bad = [], []
        for cfg in configs:
            install(one_entry_table(dt, n, k, cfg))
            c, comp_s, code = compiled(torch, linear, x, ws[0], max_autotune_gemm=True)
            err = check(ref, c(x, ws[0]))
            if "fixed_config(" not in code or err > 2e-2:
                bad.append({"config": cfg, "fixed": "fixed_config(" in code, "err": err})
                continue
            times.append((gpu_us(torch, c, x, ws), cfg))
        torch_diode.uninstall()
        times.sort(key=lambda t: t[0])
        grid_rows.append({"dtype": dt, "n": n, "k": k, "layout": a.layout, "cublas_us": cublas, "configs": [
            {"config": cfg, "us": us} for us, cfg in times], "bad": bad})
        if times:
            log(f"grid {a.layout} {dt:8s} N={n:6d} K={k:6d} cublas {cublas:7.2f} us  best {times[0][0]:7.2f} us "
                f"({cublas / times[0][0]:4.2f}x) worst {times[-1][0]:7.2f} cfg {times[0][1]} bad {len(bad)}")
        else:
            log(f"grid {dt:8s} N={n:6d} K={k:6d}: no config ran: {bad[:2]}")
        del x, ws
    measured = {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(0),
                "torch": torch.__version__, "command": "bench/gemv_reduction.py",
                "method": "CUDA graph of one call per weight copy (3x L2), median of 15 replays; "
                          f"{len(configs)} configs compiled through the hook",
                "argv": " ".join(sys.argv[1:]),
                "grid": f"{len(grid_rows) - reused} shapes measured now"
                        + (f", {reused} from {grid_rows[0]['reused_from']}/{os.path.basename(a.reuse_grid)}"
                           if reused else "")}
    tables, table_paths = {}, {}
    for rule in sorted(RULES, key=lambda r: r != a.rule):    # a.rule's table is $OUT/<hw>.json
        tables[rule] = {"format": gemv.TABLE_FORMAT, "hardware": hw_key,
                        "measured": dict(measured, rule=f"{rule}: {RULES[rule]}"),
                        "entries": table_entries(grid_rows, rule)}
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
            install(path)
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
