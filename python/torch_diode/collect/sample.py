"""Problem sampler: log-normal shapes of real models (seed-system statistics).

ln M, ln N, ln K are normal with the means/stds below (fitted on 1,577 GEMM shapes of
open models); each dimension is rounded to a multiple of 8 and clamped, then the
problem is rejected and redrawn while it exceeds the FLOP or memory caps, so one
problem's exhaustive sweep stays bounded in time and fits in GPU memory.

`sample_problems` draws those shapes alone (NN layout, fp16/bf16): its output for a seed
never changes (bench/collector_throughput.py and earlier datasets rely on it).
`sample_dataset_problems` draws the dataset mix of issue 18 on top of them: nn.Linear's
transposed weight, a decode band of M in 1..16, attention-shaped bmm/baddbmm, and a
tenth fp32 (measured with TF32 on); `--mix dataset` on the command line.
"""
from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass

from .. import wire
from .spec import SpecError, add_model_top_arguments, finish_spec

LOG_MEAN = {"m": 6.5725, "n": 5.9139, "k": 6.2049}
LOG_STD = {"m": 2.5562, "n": 1.6697, "k": 2.1647}
GEMM_OPS = wire.FAMILIES["gemm"]
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


def _check_args(n: int, ops, dtypes) -> None:
    if n < 0:
        raise ValueError("n must be >= 0")
    if not ops or not dtypes:
        raise ValueError("need at least one op and one dtype")
    for op in ops:
        if op not in GEMM_OPS:   # the samplers draw GEMM problems (scaled_mm specs are written by hand)
            raise ValueError(f"unknown op '{op}' (the samplers draw {', '.join(GEMM_OPS)})")
    for dt in dtypes:
        if dt not in _DTYPE_BYTES:
            raise ValueError(f"unknown dtype '{dt}' (the samplers draw {', '.join(_DTYPE_BYTES)})")


def sample_problems(n: int, seed: int, ops=("mm", "addmm", "bmm", "baddbmm"),
                    dtypes=("float16", "bfloat16"), bounds: Bounds = Bounds()) -> list[wire.Problem]:
    """`n` problems, cycling ops and dtypes so each pair gets a fair share; deterministic."""
    _check_args(n, ops, dtypes)
    rng = random.Random(seed)
    out: list[wire.Problem] = []
    pairs = [(op, dt) for dt in dtypes for op in ops]
    for i in range(n):
        op, dt = pairs[i % len(pairs)]
        for _ in range(1000):
            dims = _lognormal_dims(rng, bounds)
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


# ---------------------------------------------------------------- the dataset mix (issue 18)
# Shares are probabilities drawn per problem from the seed's generator; ops cycle as in
# sample_problems (each op a quarter), and fp16/bf16 alternate within each op.

# fp32 for a tenth of the problems (issue 18), measured with TF32 on: the spec the CLI
# writes for this mix has "tf32": [true], since TF32-off fp32 GEMMs are rare in models.
FP32_SHARE = 0.10
# Of mm/addmm: the decode band, M drawn uniformly from 1..16 (exact values, not multiples
# of 8: a decode step's M is the batch of sequences in flight). A quarter of mm/addmm is
# an eighth of all problems, enough to cover every M in the band many times over 1,000.
DECODE_SHARE = 0.25
DECODE_M = (1, 16)
# Of mm/addmm (decode band included): nn.Linear's layout, x @ W.T with W stored (N, K),
# i.e. trans_b=True. Model forwards are dominated by it; the rest stays NN (backward's
# dY @ W, plain matmuls) so the data still shows what the layout itself changes.
LINEAR_SHARE = 0.6
# Of bmm/baddbmm: attention shapes; the rest are the log-normal shapes with batch a power
# of two, as sample_problems draws them.
ATTENTION_SHARE = 0.5
# Of attention problems: Q @ K^T (M=N=seq, K=head_dim, K stored (B, seq, head_dim), so
# trans_b=True); the rest are P @ V (M=seq, N=head_dim, K=seq, NN).
ATTENTION_QK_SHARE = 0.5
# Of baddbmm Q @ K^T: bias "full" (B, seq, seq), an additive attention mask (ALiBi, causal
# or padding masks); the rest keep bias "row" like every other addmm/baddbmm.
MASK_SHARE = 0.5
# Batch of attention problems = heads x batch: head counts of common models (12 GPT-2 and
# BERT-base, 16 BERT-large, 20 GPT-2-large, 32 Llama-7B, 40 Llama-13B, 64 Llama-70B) and
# small multiples; only those <= Bounds.max_batch are drawn.
ATTENTION_BATCHES = (8, 12, 16, 20, 24, 32, 40, 48, 64)
HEAD_DIMS = (64, 128)
# Sequence length, log-uniform (then rounded to 8 and capped by the bounds).
ATTENTION_SEQ = (64, 8192)

MIX_KINDS = ("lognormal", "decode", "attention_qk", "attention_pv", "layer")

# The dataset mix, version 2 (`--mix dataset2`, from seed 2026112510 on). A model is only
# used inside the sizes it was trained on (model.json dataset.domain, docs/hook.md), and
# version 1 of the mix never draws N or K above Bounds.max_dim (8,192), M = 1 only once in
# 128 problems, nor attention batches above 64: the H100 hook benchmark's Llama-3-8B MLP
# (14,336), decode M = 1 and ViT attention (batch 96) all fell outside the first model's
# domain. Version 2 adds:
# * "layer" problems (of mm/addmm, LAYER_SHARE): the weight shapes (N, K) = (out, in
#   features) of nn.Linear layers of common models, nn.Linear's layout (trans_b), with M a
#   decode batch (half of them) or a prefill token count (log-uniform LAYER_PREFILL_M);
#   these are exempt from Bounds.max_dim and redrawn (M only) until within the FLOP and
#   memory caps;
# * decode M = 1 with probability DECODE_M1_SHARE (generation at batch 1), else uniform;
# * batches of bmm/baddbmm up to MIX2_MAX_BATCH (attention: ViT-B at batch 8 is 96 heads x
#   batch, Llama-3-8B at batch 4 is 128; the log-normal ones draw powers of two up to it).
# Version 1 (`--mix dataset`) is unchanged, so its seeds still resume to the same problems.
LAYER_SHAPES = (
    # Llama-3-8B / Mistral-7B: q and o, k and v, gate and up, down
    (4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336),
    # Llama-3-70B
    (8192, 8192), (1024, 8192), (28672, 8192), (8192, 28672),
    # Qwen2-7B
    (3584, 3584), (512, 3584), (18944, 3584), (3584, 18944),
    # TinyLlama-1.1B
    (2048, 2048), (256, 2048), (5632, 2048), (2048, 5632),
    # GPT-2 / BERT-base / ViT-B/16: fused qkv, attention out, fc1, fc2
    (2304, 768), (768, 768), (3072, 768), (768, 3072),
    # BERT-large / ViT-L/16
    (3072, 1024), (1024, 1024), (4096, 1024), (1024, 4096),
)
LAYER_SHARE = 0.3
LAYER_DECODE_SHARE = 0.5
LAYER_PREFILL_M = (16, 8192)
DECODE_M1_SHARE = 0.25
MIX2_ATTENTION_BATCHES = ATTENTION_BATCHES + (96, 128)
MIX2_MAX_BATCH = 128
MIX_VERSIONS = (1, 2)


def _lognormal_dims(rng: random.Random, bounds: Bounds) -> dict:
    return {d: round8(math.exp(rng.gauss(LOG_MEAN[d], LOG_STD[d])), bounds.min_dim, bounds.max_dim)
            for d in ("m", "n", "k")}


def _draw_kind(rng: random.Random, op: str, version: int = 1) -> tuple[str, bool, str]:
    """(kind, trans_b, bias) for one problem of `op`; the dimensions are drawn later."""
    if op in ("mm", "addmm"):
        if version >= 2 and rng.random() < LAYER_SHARE:
            return "layer", True, "row" if op == "addmm" else "none"
        kind = "decode" if rng.random() < DECODE_SHARE else "lognormal"
        trans_b = rng.random() < LINEAR_SHARE
        return kind, trans_b, "row" if op == "addmm" else "none"
    if rng.random() < ATTENTION_SHARE:
        if rng.random() < ATTENTION_QK_SHARE:
            bias = "none"
            if op == "baddbmm":
                bias = "full" if rng.random() < MASK_SHARE else "row"
            return "attention_qk", True, bias
        return "attention_pv", False, "row" if op == "baddbmm" else "none"
    return "lognormal", False, "row" if op == "baddbmm" else "none"


def _decode_m(rng: random.Random, version: int) -> int:
    if version >= 2 and rng.random() < DECODE_M1_SHARE:
        return 1
    return rng.randint(*DECODE_M)


def _draw_dims(rng: random.Random, kind: str, op: str, bounds: Bounds, batches: tuple[int, ...],
               version: int = 1) -> dict:
    if kind == "layer":
        n, k = rng.choice(LAYER_SHAPES)
        if rng.random() < LAYER_DECODE_SHARE:
            m = _decode_m(rng, version)
        else:  # log-uniform up to what the FLOP cap allows for this layer (70B: M <= 136)
            lo, hi = LAYER_PREFILL_M
            hi = max(lo, min(hi, int(bounds.max_gflop * 1e9 / (2.0 * n * k))))
            m = round8(math.exp(rng.uniform(math.log(lo), math.log(hi))), lo, 8 * (hi // 8) or lo)
        return {"batch": 1, "m": m, "n": n, "k": k}
    if kind == "decode":
        dims = _lognormal_dims(rng, bounds)
        dims["m"] = _decode_m(rng, version)
        return dict(dims, batch=1)
    if kind in ("attention_qk", "attention_pv"):
        batch = rng.choice(batches)
        lo, hi = ATTENTION_SEQ
        seq = round8(math.exp(rng.uniform(math.log(lo), math.log(hi))), bounds.min_dim, bounds.max_dim)
        hd = rng.choice(HEAD_DIMS)
        if kind == "attention_qk":
            return {"batch": batch, "m": seq, "n": seq, "k": hd}
        return {"batch": batch, "m": seq, "n": hd, "k": seq}
    dims = _lognormal_dims(rng, bounds)
    dims["batch"] = 2 ** rng.randint(1, int(math.log2(bounds.max_batch))) if op in BATCH_OPS else 1
    return dims


def sample_dataset_mix(n: int, seed: int, ops=("mm", "addmm", "bmm", "baddbmm"),
                       dtypes=("float16", "bfloat16"), fp32_share: float = FP32_SHARE,
                       bounds: Bounds | None = None, version: int = 1) -> list[tuple[str, wire.Problem]]:
    """`n` (kind, problem) pairs of the dataset mix (kinds: MIX_KINDS); deterministic per seed
    and version (MIX_VERSIONS: 1 is `--mix dataset`, 2 `--mix dataset2`, see LAYER_SHAPES).

    Ops cycle; `dtypes` (half precision) alternate within each op, and each problem is
    float32 instead with probability `fp32_share`. The decode band's M is below
    bounds.min_dim by design, and version 2's layer shapes may exceed bounds.max_dim; every
    problem is within the FLOP and memory caps.
    """
    _check_args(n, ops, dtypes)
    if version not in MIX_VERSIONS:
        raise ValueError(f"mix version must be one of {MIX_VERSIONS}")
    if bounds is None:
        bounds = Bounds(max_batch=MIX2_MAX_BATCH) if version >= 2 else Bounds()
    if "float32" in dtypes:
        raise ValueError("float32 is drawn at fp32_share in the dataset mix, not listed in dtypes")
    if not 0.0 <= fp32_share <= 1.0:
        raise ValueError("fp32_share must be in [0, 1]")
    batches = tuple(b for b in (MIX2_ATTENTION_BATCHES if version >= 2 else ATTENTION_BATCHES)
                    if b <= bounds.max_batch)
    if not batches and any(op in BATCH_OPS for op in ops):
        raise ValueError(f"attention problems need bounds.max_batch >= {ATTENTION_BATCHES[0]}")
    rng = random.Random(seed)
    out: list[tuple[str, wire.Problem]] = []
    pairs = [(op, dt) for dt in dtypes for op in ops]
    for i in range(n):
        op, dt = pairs[i % len(pairs)]
        if rng.random() < fp32_share:
            dt = "float32"
        kind, trans_b, bias = _draw_kind(rng, op, version)
        for _ in range(1000):
            dims = _draw_dims(rng, kind, op, bounds, batches, version)
            p = wire.Problem(op=op, dtype_a=dt, dtype_b=dt, dtype_out=dt, trans_b=trans_b, bias=bias, **dims)
            if gflop(p) <= bounds.max_gflop and problem_bytes(p) <= bounds.max_bytes:
                out.append((kind, wire.validate_problem(p)))
                break
        else:  # pragma: no cover - only with absurd bounds
            raise RuntimeError("could not draw a problem within bounds")
    return out


def sample_dataset_problems(n: int, seed: int, ops=("mm", "addmm", "bmm", "baddbmm"),
                            dtypes=("float16", "bfloat16"), fp32_share: float = FP32_SHARE,
                            bounds: Bounds | None = None, version: int = 1) -> list[wire.Problem]:
    """The problems of sample_dataset_mix (the dataset mix of issue 18), without their kinds."""
    return [p for _, p in sample_dataset_mix(n, seed, ops, dtypes, fp32_share, bounds, version)]


def problem_list_manifest(template_path: str, probs: list[wire.Problem], seed: int, name: str | None,
                          per_shard: int, search_space: str, tf32: list[bool] | None, argv=None) -> str:
    """A manifest whose sweep lists `probs` (coordinator: `distribution: problems`), so the
    fleet collects exactly this sample; every other field comes from the template manifest."""
    import yaml
    with open(template_path) as f:
        m = yaml.safe_load(f)
    ops = [op for op in ("mm", "addmm", "bmm", "baddbmm") if any(p.op == op for p in probs)]
    dtypes = [dt for dt in ("float16", "bfloat16", "float32") if any(p.dtype_a == dt for p in probs)]

    def entry(p: wire.Problem) -> dict:
        e = {"op": p.op, "dtype": p.dtype_a, "m": p.m, "n": p.n, "k": p.k}
        if p.batch != 1:
            e["batch"] = p.batch
        if p.trans_a:
            e["trans_a"] = True
        if p.trans_b:
            e["trans_b"] = True
        if p.bias != "none":
            e["bias"] = p.bias
        return e

    m["name"] = name or f"{m['name']}-{seed}"
    m.pop("sweep_id", None)
    sweep = m["sweep"]
    sweep.update({"ops": ops, "dtypes": dtypes, "problems": len(probs), "problems_per_shard": per_shard,
                  "seed": seed, "search_space": search_space,
                  "shapes": {"distribution": "problems", "list": [entry(p) for p in probs]}})
    if tf32 is not None:
        sweep["tf32"] = tf32
    import sys
    head = ("# Written by python -m torch_diode.collect.sample "
            + " ".join(sys.argv[1:] if argv is None else argv) + "\n"
            "# The sample's problems, listed (distribution: problems); hardware and timing from "
            + os.path.basename(template_path) + ".\n")
    body = yaml.safe_dump(m, sort_keys=False, default_flow_style=None, width=200)
    return head + body


def main(argv=None) -> int:
    """python -m torch_diode.collect.sample --n 64 --seed 2026 --shard-id ID [--mix dataset] --out spec.json"""
    import argparse
    import json
    ap = argparse.ArgumentParser(prog="python -m torch_diode.collect.sample",
                                 description="Write a shard spec of sampled problems: log-normal shapes "
                                             "(--mix lognormal, the default) or the dataset mix "
                                             "(--mix dataset: nn.Linear layouts, decode band, attention, "
                                             "a tenth fp32 with TF32 on; --mix dataset2 adds the layer "
                                             "shapes of common models, more M = 1 and attention batches "
                                             "up to 128).")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--shard-id", required=True)
    ap.add_argument("--sweep-id", default="")
    ap.add_argument("--ops", default="mm,addmm,bmm,baddbmm")
    ap.add_argument("--dtypes", default="float16,bfloat16",
                    help="with --mix dataset: the half-precision dtypes; float32 comes from --fp32-share")
    ap.add_argument("--mix", choices=("lognormal", "dataset", "dataset2"), default="lognormal")
    ap.add_argument("--fp32-share", type=float, default=FP32_SHARE,
                    help=f"--mix dataset: share of float32 problems (default {FP32_SHARE})")
    ap.add_argument("--search-space", default="EXHAUSTIVE")
    ap.add_argument("--manifest-from", metavar="TEMPLATE.yaml",
                    help="write a manifest (manifests/README.md, distribution: problems) instead of a "
                         "spec: hardware, timing and priority from TEMPLATE, the sweep from this sample")
    ap.add_argument("--name", help="--manifest-from: the new manifest's name (default: template's name-seed)")
    ap.add_argument("--problems-per-shard", type=int, default=10, help="--manifest-from: shard size")
    add_model_top_arguments(ap)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    ops, dtypes = tuple(a.ops.split(",")), tuple(a.dtypes.split(","))
    try:
        if a.mix in ("dataset", "dataset2"):
            probs = sample_dataset_problems(a.n, a.seed, ops, dtypes, a.fp32_share,
                                            version=2 if a.mix == "dataset2" else 1)
        else:
            probs = sample_problems(a.n, a.seed, ops, dtypes)
    except ValueError as e:
        ap.error(str(e))
    if a.manifest_from:
        with open(a.out, "w") as f:
            f.write(problem_list_manifest(a.manifest_from, probs, a.seed, a.name, a.problems_per_shard,
                                          a.search_space, tf32=[True] if a.mix != "lognormal" else None,
                                          argv=argv))
        return 0
    spec = {"shard_id": a.shard_id, "sweep_id": a.sweep_id, "search_space": a.search_space,
            "problems": [wire.to_json(p) for p in probs]}
    if a.mix != "lognormal":
        spec["tf32"] = [True]  # the mix's float32 problems are measured with TF32 on only
    try:
        finish_spec(spec, a)
    except SpecError as e:
        ap.error(str(e))
    with open(a.out, "w") as f:
        json.dump(spec, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
