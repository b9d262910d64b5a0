"""Measures this GPU's GEMV table: the launch config of predict mode's M = 1 reduction
(torch_diode/hook/gemv.py) for each shape of a grid, and cuBLAS's time beside it.

    python -m torch_diode.tools.gemv_table --out my-gpu.json          # ~6 min on an H200
    TORCH_DIODE_GEMV_TABLE=my-gpu.json python my_script.py             # predict mode uses it

The package ships tables only for the GPUs the project measured (hook/gemv_tables/); on any
other GPU predict mode keeps the GEMM path for M = 1 until a table exists. This is the
measurement that made the shipped ones (bench/gemv_reduction.py (script removed; git history) runs it, then checks the
table on held-out shapes).

For each (dtype, outputs N, K) of the grid (M = 1; layout "inner": F.linear's weight (N, K),
"outer": x @ W with W stored (K, N)): cuBLAS's GPU time, then every launch config of the
layout's list compiled through the hook itself (predict mode, a one-entry table naming that
config: the reduction is Inductor's own, only its launch config is fixed) and timed; a
config whose kernel does not carry it, or whose result differs from eager, is left out.
Each shape's config is then chosen by a rule (RULES; default robust) and written with its
time and cuBLAS's as the table; the hook uses an entry only where its reduction was 3%
faster than cuBLAS.

GPU time: a CUDA graph of one call per weight copy, the copies together 3x the L2 (so the
weight comes from HBM, as in a decode step), timed with CUDA events, median of 15 replays,
divided by the calls in the graph.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from ..hook import gemv
from ..summary_stats import geomean  # the one definition bench/stats.py re-exports

TABLE_GRID_N = (1536, 3072, 6144, 12288, 24576)
# K 24,576 since the first H200 run's table (which stopped at 12,288, so K = 28,672 kept cuBLAS)
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
LAYOUT_CONFIGS = {"inner": CONFIGS, "outer": CONFIGS_OUTER}
GRID_K = {"inner": TABLE_GRID_K, "outer": TABLE_GRID_K[:-1]}    # outer: one device call's worth of compiles
MIN_SHAPE_S = 120.0          # the budget a grid shape needs to start (22 compiles and their timing)
MAX_ERR = 2e-2               # relative error against eager beyond which a config's kernel is refused

RULES = {
    "fastest": "each shape's own fastest config",
    "robust": "each shape's config is the one with the lowest geomean time relative to the fastest over the "
              "grid shapes of its dtype and layout within one octave (log2 distance <= 1), itself included",
}


def grid_shapes(layout: str) -> list[tuple[str, int, int]]:
    """The (dtype, N, K) grid of a layout, in measuring order."""
    return [(dt, n, k) for dt in DTYPES for n in TABLE_GRID_N for k in GRID_K[layout]]


# ------------------------------------------------------------------ measuring (needs a GPU)

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
    """Microseconds per call of fn(x, w): one CUDA graph over every weight copy, median of replays."""
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


def check(ref, got):
    """Relative error of `got` against `ref` (the eager call)."""
    return float((got.float() - ref.float()).norm() / ref.float().norm())


class HookWithOneConfig:
    """Installs the hook in predict mode with a table of one entry, so a compile of that
    shape gets exactly that launch config (or with any table file, for a held-out check)."""

    def __init__(self, hw_key: str, work_dir: str, model: str | None = None):
        self.hw_key, self.work_dir, self.model = hw_key, work_dir, model

    def table_for(self, dt: str, n: int, k: int, cfg: dict, layout: str) -> str:
        path = os.path.join(self.work_dir, "one-entry.json")
        with open(path, "w") as f:
            json.dump({"format": gemv.TABLE_FORMAT, "hardware": self.hw_key, "measured": {"bench": "grid"},
                       "entries": [{"dtype": dt, "layout": layout, "n": n, "k": k, "config": cfg,
                                    "reduction_us": 1.0, "cublas_us": 1000.0}]}, f)
        return path

    def install(self, table_path: str) -> None:
        import torch_diode
        os.environ[gemv.ENV_TABLE] = table_path
        gemv._tables.clear()
        torch_diode.install(self.model, mode="predict", force=True)
        torch_diode.reset_prediction_stats()


def measure_grid(torch, shapes, layout: str, configs, hook: HookWithOneConfig,
                 left: Callable[[], float], reused=(), log: Callable[..., Any] = print) -> list[dict]:
    """The grid rows of `shapes` ((dtype, N, K)) that `reused` (an earlier run's rows) does not
    hold: cuBLAS's time and each config's, fastest first, and the configs left out ("bad")
    with why. Stops when `left()` seconds fall under MIN_SHAPE_S."""
    import torch_diode
    done = {shape_of(r) for r in reused}
    log(f"grid: {len(reused)} shapes reused, {sum((*s, layout) not in done for s in shapes)} to measure "
        f"x {len(configs)} configs")
    linear = matvec_fn(torch, layout)
    rows = []
    for i, (dt, n, k) in enumerate(shapes):
        if (dt, n, k, layout) in done:
            continue
        if left() < MIN_SHAPE_S:
            log(f"budget: grid stops before {dt} {n}x{k} ({len(rows)} measured)")
            break
        dtype = getattr(torch, dt)
        x, ws = make_inputs(torch, dtype, n, k, layout)
        ref = linear(x, ws[0])
        cublas = gpu_us(torch, linear, x, ws)
        times, bad = [], []
        for cfg in configs:
            hook.install(hook.table_for(dt, n, k, cfg, layout))
            c, _, code = compiled(torch, linear, x, ws[0], max_autotune_gemm=True)
            err = check(ref, c(x, ws[0]))
            if "fixed_config(" not in code or err > MAX_ERR:
                bad.append({"config": cfg, "fixed": "fixed_config(" in code, "err": err})
                continue
            times.append((gpu_us(torch, c, x, ws), cfg))
        torch_diode.uninstall()
        times.sort(key=lambda t: t[0])
        rows.append({"dtype": dt, "n": n, "k": k, "layout": layout, "cublas_us": cublas, "configs": [
            {"config": cfg, "us": us} for us, cfg in times], "bad": bad})
        if times:
            log(f"grid {layout} {dt:8s} N={n:6d} K={k:6d} cublas {cublas:7.2f} us  best {times[0][0]:7.2f} us "
                f"({cublas / times[0][0]:4.2f}x) worst {times[-1][0]:7.2f} cfg {times[0][1]} bad {len(bad)} "
                f"[{i + 1}/{len(shapes)}]")
        else:
            log(f"grid {layout} {dt:8s} N={n:6d} K={k:6d}: no config ran: {bad[:2]} [{i + 1}/{len(shapes)}]")
        del x, ws
    return rows


# ------------------------------------------------------------------ the table from a measured grid (no GPU)

def shape_of(row: dict) -> tuple[str, int, int, str]:
    """A grid row's (dtype, n, k, layout); rows from before the layout was recorded are "inner"."""
    return row["dtype"], row["n"], row["k"], row.get("layout", "inner")


def rel_times(grid_rows):
    """(dtype, n, k, layout) -> {config key: time / that shape's fastest}, and -> {key: us}."""
    rel, us = {}, {}
    for r in grid_rows:
        if not r["configs"]:
            continue
        best = min(c["us"] for c in r["configs"])
        shape = shape_of(r)
        us[shape] = {json.dumps(c["config"], sort_keys=True): c["us"] for c in r["configs"]}
        rel[shape] = {key: t / best for key, t in us[shape].items()}
    return rel, us


def _dist(a, b):
    """gemv.log2_distance of two (dtype, n, k, layout) shapes."""
    return gemv.log2_distance(a[1], a[2], b[1], b[2])


def choose(rel, shape, rule, exclude=None):
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
    rel, us = rel_times(grid_rows)
    cublas = {shape_of(r): r["cublas_us"] for r in grid_rows}
    out = []
    for shape in rel:
        c = choose(rel, shape, rule)
        out.append({"dtype": shape[0], "layout": shape[3], "n": shape[1], "k": shape[2], "config": json.loads(c),
                    "reduction_us": round(us[shape][c], 3), "cublas_us": round(cublas[shape], 3)})
    return out


def table_doc(hw_key: str, grid_rows, rule: str, measured: dict) -> dict:
    """The table file (format torch_diode.gemv_table/1) of a measured grid by `rule`."""
    return {"format": gemv.TABLE_FORMAT, "hardware": hw_key,
            "measured": dict(measured, rule=f"{rule}: {RULES[rule]}"),
            "entries": table_entries(grid_rows, rule)}


def measured_block(torch, command: str, configs, argv: list[str], grid_rows, reuse_path: str | None) -> dict:
    """A table's provenance (its `measured` object): date, GPU, torch, command, method, argv,
    and how many grid shapes this run measured and which earlier run lent the others."""
    reused = sum("reused_from" in r for r in grid_rows)
    return {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__, "command": command,
            "method": "CUDA graph of one call per weight copy (3x L2), median of 15 replays; "
                      f"{len(configs)} configs compiled through the hook",
            "argv": " ".join(argv),
            "grid": f"{len(grid_rows) - reused} shapes measured now"
                    + (f", {reused} from {grid_rows[0]['reused_from']}/{os.path.basename(reuse_path)}"
                       if reused else "")}


def reused_grid(results_path, hardware):
    """The grid rows of an earlier run's results file; refused when measured on other hardware."""
    with open(results_path) as f:
        res = json.load(f)
    if res.get("hardware") != hardware:
        raise SystemExit(f"--reuse-grid {results_path}: measured on {res.get('hardware')}, not {hardware}")
    return [dict(r, reused_from=os.path.basename(os.path.dirname(os.path.abspath(results_path))))
            for r in res["grid"]]


def fresh_caches() -> str:
    """Empty Inductor and Triton caches for this process (every config is compiled, never
    taken from an earlier run's cache); returns the directory."""
    cache = tempfile.mkdtemp(prefix="gemv-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(cache, "triton"))
    return cache


# ------------------------------------------------------------------ the command

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m torch_diode.tools.gemv_table", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="the table file to write (default: ./<hardware key>.json)")
    ap.add_argument("--results", help="every shape's measured times, for --reuse-grid or a later "
                                      "re-derivation (default: the table's name with .grid.json)")
    ap.add_argument("--layout", choices=gemv.LAYOUTS, default="inner",
                    help="inner = F.linear's weight (N, K) (default), outer = x @ W with W (K, N); "
                         "with --reuse-grid of the other layout the table holds both")
    ap.add_argument("--rule", choices=sorted(RULES), default="robust", help="how each shape's config is chosen")
    ap.add_argument("--budget-s", type=float, default=900.0, help="stop starting new shapes after this")
    ap.add_argument("--reuse-grid", metavar="RESULTS", help="take the shapes an earlier --results file "
                                                             "(same hardware) measured; measure the rest")
    ap.add_argument("--quick", action="store_true", help="two shapes, three configs (a smoke test)")
    a = ap.parse_args(argv)
    t_start = time.monotonic()
    cache = fresh_caches()
    import torch
    if not torch.cuda.is_available():
        print("gemv_table: needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    from torch._inductor import config
    config.fx_graph_cache = False
    import torch_diode
    torch_diode.uninstall()                  # the import may have installed it; cuBLAS is timed without
    hw_key = torch_diode.get_detected_hardware().get("hardware_key")
    if not hw_key:
        print("gemv_table: no hardware key for this GPU (set DIODE_HARDWARE_KEY)", file=sys.stderr)
        return 2
    out = a.out or f"{hw_key}.json"
    results = a.results or (out[:-5] if out.endswith(".json") else out) + ".grid.json"
    print(f"gemv_table: {torch.cuda.get_device_name(0)} ({hw_key}), torch {torch.__version__}, "
          f"layout {a.layout}, rule {a.rule} -> {out}", flush=True)
    shapes, configs = grid_shapes(a.layout), LAYOUT_CONFIGS[a.layout]
    if a.quick:
        shapes, configs = shapes[:2], configs[:3]
    grid_rows = reused_grid(a.reuse_grid, hw_key) if a.reuse_grid else []
    from ..hook import api
    loaded, _ = api.resolve_model(quiet=True)      # once; each config's install reuses its directory
    hook = HookWithOneConfig(hw_key, cache, loaded.info.path if loaded else None)
    grid_rows += measure_grid(torch, shapes, a.layout, configs, hook,
                              lambda: a.budget_s - (time.monotonic() - t_start), grid_rows,
                              log=lambda *m: print(*m, flush=True))
    measured = measured_block(torch, "python -m torch_diode.tools.gemv_table", configs,
                              sys.argv[1:] if argv is None else argv, grid_rows, a.reuse_grid)
    doc = table_doc(hw_key, grid_rows, a.rule, measured)
    with open(results, "w") as f:       # every measured time, kept even when no table comes of it
        json.dump({"hardware": hw_key, "measured": measured, "grid": grid_rows}, f, indent=1)
    try:
        gemv.parse_table(json.dumps(doc).encode(), out)   # what the hook will read, checked first
    except gemv.GemvTableError as e:
        print(f"gemv_table: no table written ({e}): no grid shape had a config that ran "
              f"(budget {a.budget_s:.0f} s; the measured times are in {results})", file=sys.stderr)
        return 1
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    used = sum(e["reduction_us"] <= (1 - gemv.DEFAULT_MARGIN) * e["cublas_us"] for e in doc["entries"])  # as predict()
    print(f"table: {len(doc['entries'])} entries, {used} where the reduction beats cuBLAS by the hook's "
          f"{gemv.DEFAULT_MARGIN:.0%} margin -> {out} (grid: {results})\n"
          f"use it: TORCH_DIODE_GEMV_TABLE={os.path.abspath(out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
