#!/usr/bin/env python3
"""Would a split-K candidate beat cuBLAS on small-M decode GEMMs? A probe before building one.

    PYTHONPATH=python PYTHONUNBUFFERED=1 python3 bench/splitk_probe.py --out $OUT

Why: on the H200 (2026-11-28, bench/RESULTS.md) predict mode hands the M = 4-16 decode GEMMs
of issue 20's workloads to cuBLAS, which reads the weight at ~62% of HBM bandwidth there
(l3_up_m16: 37.7 us for a 117 MB weight), and no Inductor GEMM config in the collector's
data beats it. Splitting K spreads such a GEMM over more CTAs; Inductor has that as its
`decompose_k` choice (a bmm over K splits, then a sum), offered only when K >= 32 x M and
32 x N (`triton.decompose_k_threshold`). This probe times, side by side for each shape
(F.linear, the weight's K contiguous, cold L2 as in a decode step: gemv_reduction.gpu_us):
- cuBLAS (eager F.linear);
- eager split-K with S splits: cuBLAS bmm of the S slices with an fp32 output, then the sum;
- max-autotune with decompose_k offered (threshold 0): Inductor's own split-K next to its
  GEMM templates and cuBLAS, and what its autotuner picked (warm-L2 benchmarks).
A split-K candidate is worth building only where a row beats cuBLAS clearly.
Results: $OUT/splitk-results.json and a table on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SHAPES = (  # (name, dtype, M, N, K): issue 20's decode workloads, and neighbours
    ("l3_up_m16", "bfloat16", 16, 14336, 4096),
    ("l3_down_m16", "float16", 16, 4096, 14336),
    ("l3_kv_m4", "bfloat16", 4, 1024, 4096),
    ("l3_up_m8", "bfloat16", 8, 14336, 4096),
    ("l3_q_m16", "float16", 16, 4096, 4096),
    ("l70_up_m16", "bfloat16", 16, 28672, 8192),
)
SPLITS = (2, 4, 8, 16)


def log(*a):
    print(*a, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=240.0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="splitk-inductor-"))
    import torch
    from torch._inductor import config
    from gemv_reduction import check, compiled, gpu_us, make_inputs, matvec_fn
    config.fx_graph_cache = False
    t0 = time.monotonic()
    linear = matvec_fn(torch, "inner")      # F.linear(x, w)

    def splitk(s):
        def fn(x, w):
            m, k = x.shape
            n = w.shape[0]
            xs = x.view(m, s, k // s).transpose(0, 1)           # (S, M, K/S)
            ws = w.view(n, s, k // s).permute(1, 2, 0)          # (S, K/S, N), K/S contiguous
            if fp32_partials[0]:
                try:
                    return torch.bmm(xs, ws, out_dtype=torch.float32).sum(0).to(x.dtype)
                except RuntimeError:   # no bmm out_dtype on this torch: partials in the GEMM's dtype
                    fp32_partials[0] = False
            return torch.bmm(xs, ws).float().sum(0).to(x.dtype)
        return fn

    fp32_partials = [True]

    rows = []
    for name, dt, m, n, k in SHAPES:
        if time.monotonic() - t0 > a.budget_s - 40:
            log(f"budget: stops before {name}")
            break
        dtype = getattr(torch, dt)
        x, ws = make_inputs(torch, dtype, n, k, m=m)     # weight copies 3x the L2: cold, as in decode
        ref = linear(x, ws[0])
        row = {"name": name, "dtype": dt, "m": m, "n": n, "k": k, "cublas_us": gpu_us(torch, linear, x, ws),
               "splitk_us": {}, "splitk_err": {}}
        for s in SPLITS:
            try:
                fn = splitk(s)
                row["splitk_err"][s] = check(ref, fn(x, ws[0]))
                row["splitk_us"][s] = gpu_us(torch, fn, x, ws)
            except Exception as e:   # out_dtype missing on this torch, or a split that does not divide K
                row["splitk_us"][s] = None
                row["splitk_error"] = f"{type(e).__name__}: {e}"[:200]
        try:
            c, row["dk_compile_s"], code = compiled(torch, linear, x, ws[0], max_autotune_gemm=True,
                                                    **{"triton.decompose_k_threshold": 0})
            row["dk_us"] = gpu_us(torch, c, x, ws)
            row["dk_err"] = check(ref, c(x, ws[0]))
            row["dk_picked_bmm"] = "bmm" in code
            row["dk_picked_extern_mm"] = "extern_kernels.mm" in code
        except Exception as e:
            row["dk_error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        best = min((v, s) for s, v in row["splitk_us"].items() if v is not None) if any(
            v is not None for v in row["splitk_us"].values()) else (float("nan"), None)
        log(f"{name:12s} {dt:8s} M={m:3d} N={n:6d} K={k:6d} cublas {row['cublas_us']:7.2f} us  "
            f"split-K best {best[0]:7.2f} (S={best[1]}, {row['cublas_us'] / best[0]:.2f}x)  "
            + " ".join(f"S{s}={v:.2f}" for s, v in row["splitk_us"].items() if v is not None)
            + (f"  decompose_k-offered max-autotune {row['dk_us']:7.2f} ({row['dk_compile_s']:.1f} s, "
               f"bmm={row['dk_picked_bmm']} extern_mm={row['dk_picked_extern_mm']})" if "dk_us" in row
               else f"  dk error {row.get('dk_error')}"))
        del x, ws
    res = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "fp32_partials": fp32_partials[0],
           "rows": rows}
    with open(os.path.join(a.out, "splitk-results.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
