"""Problem sampler: log-normal shapes of real models (seed-system statistics).

ln M, ln N, ln K are normal with the means/stds below (fitted on 1,577 GEMM shapes of
open models); each dimension is rounded to a multiple of 8 and clamped, then the
problem is rejected and redrawn while it exceeds the FLOP or memory caps, so one
problem's exhaustive sweep stays bounded in time and fits in GPU memory.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .. import wire

LOG_MEAN = {"m": 6.5725, "n": 5.9139, "k": 6.2049}
LOG_STD = {"m": 2.5562, "n": 1.6697, "k": 2.1647}
BIAS_OPS = ("addmm", "baddbmm")
BATCH_OPS = ("bmm", "baddbmm")
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


@dataclass(frozen=True)
class Bounds:
    min_dim: int = 16
    max_dim: int = 8192
    max_batch: int = 64
    max_gflop: float = 64.0       # 2*B*M*N*K / 1e9
    max_bytes: int = 2 << 30      # A + B + C (+ bias) bytes


def round8(x: float, lo: int, hi: int) -> int:
    return int(min(max(8 * round(x / 8), lo), hi))


def problem_bytes(p: wire.Problem) -> int:
    e = _DTYPE_BYTES[p.dtype_a]
    return e * p.batch * (p.m * p.k + p.k * p.n + 2 * p.m * p.n)


def gflop(p: wire.Problem) -> float:
    return 2.0 * p.batch * p.m * p.n * p.k / 1e9


def sample_problems(n: int, seed: int, ops=("mm", "addmm", "bmm", "baddbmm"),
                    dtypes=("float16", "bfloat16"), bounds: Bounds = Bounds()) -> list[wire.Problem]:
    """`n` problems, cycling ops and dtypes so each pair gets a fair share; deterministic."""
    if n < 0:
        raise ValueError("n must be >= 0")
    if not ops or not dtypes:
        raise ValueError("need at least one op and one dtype")
    for op in ops:
        if op not in wire.OPS:
            raise ValueError(f"unknown op '{op}'")
    for dt in dtypes:
        if dt not in wire.DTYPES:
            raise ValueError(f"unknown dtype '{dt}'")
    rng = random.Random(seed)
    out: list[wire.Problem] = []
    pairs = [(op, dt) for dt in dtypes for op in ops]
    for i in range(n):
        op, dt = pairs[i % len(pairs)]
        for _ in range(1000):
            dims = {d: round8(math.exp(rng.gauss(LOG_MEAN[d], LOG_STD[d])), bounds.min_dim, bounds.max_dim)
                    for d in ("m", "n", "k")}
            # Batch sizes of bmm in models are mostly small powers of two (heads x batch).
            batch = 2 ** rng.randint(1, int(math.log2(bounds.max_batch))) if op in BATCH_OPS else 1
            p = wire.Problem(op=op, batch=batch, dtype_a=dt, dtype_b=dt, dtype_out=dt,
                             bias="row" if op in BIAS_OPS else "none", **dims)
            if gflop(p) <= bounds.max_gflop and problem_bytes(p) <= bounds.max_bytes:
                out.append(wire.validate_problem(p))
                break
        else:  # pragma: no cover - only with absurd bounds
            raise RuntimeError("could not draw a problem within bounds")
    return out


def main(argv=None) -> int:
    """python -m torch_diode.collect.sample --n 64 --seed 2026 --shard-id ID --out spec.json"""
    import argparse
    import json
    ap = argparse.ArgumentParser(prog="python -m torch_diode.collect.sample",
                                 description="Write a shard spec of log-normally sampled problems.")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--shard-id", required=True)
    ap.add_argument("--sweep-id", default="")
    ap.add_argument("--ops", default="mm,addmm,bmm,baddbmm")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--search-space", default="EXHAUSTIVE")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    probs = sample_problems(a.n, a.seed, tuple(a.ops.split(",")), tuple(a.dtypes.split(",")))
    spec = {"shard_id": a.shard_id, "sweep_id": a.sweep_id, "search_space": a.search_space,
            "problems": [wire.to_json(p) for p in probs]}
    from .spec import parse_spec
    parse_spec(spec)  # what we write must load
    with open(a.out, "w") as f:
        json.dump(spec, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
