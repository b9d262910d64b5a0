#!/usr/bin/env python3
"""End-to-end benchmark of the torch_diode Inductor hook on a GPU (issue 20's table).

How to run on the GPU (H100, torch 2.11, no network; one device call each, ~9 min):

    PYTHONPATH=python PYTHONUNBUFFERED=1 python3 bench/hook_end_to_end.py --jobs 4 --part 1/2 --budget-s 540 --out $OUT
    PYTHONPATH=python PYTHONUNBUFFERED=1 python3 bench/hook_end_to_end.py --jobs 4 --part 2/2 --budget-s 540 --out $OUT

then, on any machine (CPU is enough), join the two parts into one table with the goals:

    python3 bench/hook_end_to_end.py --merge PART1/results-part1of2.json PART2/results-part2of2.json --out DIR

The default workloads do not fit one 10-minute call (on the H100, 2026-11-25, with --jobs 4
the compile modes of all 15 workloads took ~440 s and the collector's cold kernel cache
40-90 s per kernel class), so --part i/n splits them (the GEMMs of one collector kernel
class stay in one part); each part runs the GEMMs' compile modes, then the collector (problems
it did not reach: not_finished), then the small models; what does not fit --budget-s is
reported as skipped_budget, never dropped silently, and --skip-done FILE re-runs only what
is missing (join the files with --merge). If part 1 shows much more overflow, use --part i/3. Check the plan
and the whole driver first, on CPU: `python3 bench/hook_end_to_end.py --dry-run` (fake
timings), and `--smoke-cpu --workloads l3_kv_m4` (the workers' real compile path, tiny shapes).

Modes, per workload (each compile mode in its own Python subprocess with its own empty
Inductor and Triton caches, caches force-disabled):

  plain            torch.compile(fn)                                    (no autotuning)
  default          torch.compile(fn, mode="max-autotune-no-cudagraphs"), DEFAULT GEMM search space
  diode_predict    torch.compile(fn, options={"max_autotune_gemm": True}) + torch_diode mode=predict:
                   the model's choice alone, nothing benchmarked (PREDICT_OPTIONS: GEMM templates on,
                   no coordinate descent, which benchmarks pointwise/reduction kernels: +4 s on an
                   M = 1 GEMM, 2x plain on the MLP block); an M = 1 GEMM becomes Inductor's reduction
                   with the GEMV table's launch config where this GPU has a table (docs/hook.md)
  diode_predict_cd diode_predict plus coordinate_descent_tuning (off by default; --modes adds it): Inductor's
                   mm/bmm decompositions turn an M = 1 (or N = 1) GEMM into a reduction only under
                   coordinate descent, and DEFAULT's reduction beat cuBLAS 1.13-1.30x on the M = 1
                   rows of 2026-11-26; this mode measures what that costs predict in compile time
  diode_top5       max-autotune + torch_diode mode=topk: Inductor benchmarks the model's top-k (k=5)
  collector        python -m torch_diode.collect on the GEMM workloads (EXHAUSTIVE space, every config
                   timed, ATen included): the best ok record is "best of EXHAUSTIVE" (one subprocess per part)
  exhaustive       Inductor's own max-autotune EXHAUSTIVE pass (off by default: too slow)
  diode_exhaustive torch_diode topk scoring the EXHAUSTIVE list (off by default)

The autotuning modes compile with mode="max-autotune-no-cudagraphs" (AUTOTUNE_MODE): under
"max-autotune" the compiled callable is a CUDA graph whose input copies (a foreach copy kernel,
+20-60 us per call, 2.5x a 14 us GEMM) the profiler counts as GPU time of that mode and not
of plain's (first GPU run, 2026-11-25); the GEMM kernels chosen are the same in both modes.

Workers run --jobs at a time: start-up (python, torch, CUDA) and teardown overlap, while
the cold compile and the GPU measurement hold one lock file (no two workers compile or use
the GPU at once); the collector runs with no worker in flight. Each row records its lock wait.

Measured: the cold compile time (first call: Dynamo + Inductor + autotuning) and the GPU
time of the compiled callable: the sum of its kernels' durations from the CUDA profiler
(CUPTI) per call, median over --reps calls, each call preceded by a write of 2 x L2 (cold
L2, as the collector times), so launch overhead (140 us of wall for a 6.8 us GEMM) is not
counted; memcpys (e.g. CUDA-graph input copies) are reported apart. Eager (cuBLAS) is timed
the same way in every worker. Under mode="max-autotune", mm/bmm with M = 1 (or N = 1) is
decomposed into a reduction (coordinate descent), so no GEMM template is autotuned and the
hook is not asked: the table's "GEMM autotuned" column says so per row.

Output under --out: results[-partIofN].json (everything, incl. goals), table[-partIofN].md,
the collector's shard (collector[-partIofN].msgpack.gz) and its stats. Goals (issue 20),
geomeans, printed PASS/FAIL:
  predict compile <= 1.30x plain and <= 0.30x DEFAULT (all workloads);
  predict GEMM GPU time <= 0.90x DEFAULT's pick and <= 1.03x best(EXHAUSTIVE collector, cuBLAS);
  no workload slower than 1.10x cuBLAS (predict and top-5, max over workloads);
  top-5 GEMM GPU time <= 1.01x best.
Information rows after them (never PASS/FAIL): the GEMM ratios over the GEMMs DEFAULT autotuned
(@autotuned), and oracle_gpu_vs_default@info, geomean over the GEMMs of min(best, DEFAULT GPU) /
DEFAULT GPU: the lowest predict_gpu_vs_default any selector could reach on these workloads.

  --profile                     cProfile each cold compile: results.json rows get compile_profile
                                (top functions); bench/compile_profile_diff.py (script removed; git history) compares two modes
  --rank-timing [--model DIR]   CPU: time for the hook to rank ~1,400 configs, then exit
  --check-dataset DIR           list workloads whose GEMM problems appear in a dataset (training data)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import types

# The benchmark's acceptance goals (issue 20): name -> (metric over workloads, threshold, what).
# A goal passes when its value is <= the threshold; the table prints PASS/FAIL per goal.
GOALS = {
    "predict_compile_vs_plain": ("geomean", 1.30, "diode_predict compile / plain compile (all workloads)"),
    "predict_compile_vs_default": ("geomean", 0.30, "diode_predict compile / DEFAULT compile (all workloads)"),
    "predict_gpu_vs_default": ("geomean", 0.90, "diode_predict GPU / DEFAULT GPU (GEMM workloads)"),
    "predict_gpu_vs_best": ("geomean", 1.03, "diode_predict GPU / best(EXHAUSTIVE collector, cuBLAS) (GEMMs)"),
    "predict_gpu_vs_cublas_max": ("max", 1.10, "diode_predict GPU / eager cuBLAS, worst workload"),
    "top5_gpu_vs_cublas_max": ("max", 1.10, "diode_top5 GPU / eager cuBLAS, worst workload"),
    "top5_gpu_vs_best": ("geomean", 1.01, "diode_top5 GPU / best(EXHAUSTIVE collector, cuBLAS) (GEMMs)"),
}

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # stats, when imported from elsewhere

# One definition for every bench script, the same as `diode validate` (bench/stats.py);
# geomean (None entries left out, None for no values) stays importable from here.
from stats import geomean, quantile, ratio  # noqa: E402

REPO = os.path.dirname(HERE)
PYTHON_DIR = os.path.join(REPO, "python")
SHIPPED = os.path.join(PYTHON_DIR, "torch_diode", "bundles")
# The hardware the CPU paths (--dry-run, --smoke-cpu) take the shipped model of: no GPU to detect.
CPU_HARDWARE_KEY = "nvidia-h100-80gb"

COMPILE_MODES = ("plain", "default", "diode_predict", "diode_top5", "exhaustive", "diode_exhaustive",
                 "diode_predict_cd")
MODES = COMPILE_MODES[:4] + ("collector",) + COMPILE_MODES[4:]
DEFAULT_MODES = ("plain", "default", "diode_predict", "diode_top5", "collector")
ALIASES = {"diode": "diode_top5", "predict": "diode_predict", "top5": "diode_top5"}
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
AUTOTUNE_MODE = "max-autotune-no-cudagraphs"  # no CUDA graph: its input-copy kernels are not the GEMM's
PREDICT_OPTIONS = {"max_autotune_gemm": True}  # predict mode as docs/hook.md recommends it
PROFILE_TOP = 120  # functions kept per ordering by --profile
PREDICT_CD_OPTIONS = dict(PREDICT_OPTIONS, coordinate_descent_tuning=True)  # + M = 1 GEMMs as reductions
PREDICT_MODES = ("diode_predict", "diode_predict_cd")  # torch_diode mode=predict: nothing benchmarked
LOCK_ENV = "DIODE_E2E_LOCK"  # lock file held by a worker from compile to the end of its measurement

# Workloads: layers of real models, none in the datasets but l3_q_m1 (H100, H200) and l3_gate_m1
# (H200), which dataset2 reached (--check-dataset; docs/hook.md).
# GEMM ops: linear = nn.Linear without bias (x @ W^T: wire mm, trans_b), addmm = nn.Linear with
# bias (wire addmm, trans_b, bias row), bmm_nt = Q @ K^T (wire bmm, trans_b), bmm = P @ V (NN).
# Llama-3-8B: d 4096, k/v 1024 (8 KV heads of 128), MLP 14336; ViT-B/16: 197 tokens x 768, MLP 3072.
WORKLOADS = {
    # decode (M = batch of sequences, 1..16)
    "l3_q_m1": {"kind": "gemm", "op": "linear", "m": 1, "n": 4096, "k": 4096, "dtype": "bf16",
                "layer": "Llama-3-8B q_proj, decode M=1"},
    "l3_kv_m4": {"kind": "gemm", "op": "linear", "m": 4, "n": 1024, "k": 4096, "dtype": "bf16",
                 "layer": "Llama-3-8B k/v_proj, decode M=4"},
    "l3_up_m16": {"kind": "gemm", "op": "linear", "m": 16, "n": 14336, "k": 4096, "dtype": "bf16",
                  "layer": "Llama-3-8B gate/up_proj, decode M=16"},
    "l3_down_m16": {"kind": "gemm", "op": "linear", "m": 16, "n": 4096, "k": 14336, "dtype": "fp16",
                    "layer": "Llama-3-8B down_proj, decode M=16"},
    "l3_gate_m1": {"kind": "gemm", "op": "linear", "m": 1, "n": 14336, "k": 4096, "dtype": "fp16",
                   "layer": "Llama-3-8B gate_proj, decode M=1"},
    # prefill
    "l3_qkv_p2048": {"kind": "gemm", "op": "linear", "m": 2048, "n": 6144, "k": 4096, "dtype": "fp16",
                     "layer": "Llama-3-8B fused q/k/v, prefill 2048"},
    "l3_down_p4096": {"kind": "gemm", "op": "linear", "m": 4096, "n": 4096, "k": 14336, "dtype": "bf16",
                      "layer": "Llama-3-8B down_proj, prefill 4096"},
    "l3_o_p8192": {"kind": "gemm", "op": "linear", "m": 8192, "n": 4096, "k": 4096, "dtype": "fp16",
                   "layer": "Llama-3-8B o_proj, prefill 8192"},
    # attention bmm (batch * heads, seq, head_dim 128)
    "attn_qk_32x2048": {"kind": "gemm", "op": "bmm_nt", "batch": 32, "m": 2048, "n": 2048, "k": 128,
                        "dtype": "bf16", "layer": "Llama-3-8B Q@K^T, 32 heads, seq 2048"},
    "attn_pv_32x2048": {"kind": "gemm", "op": "bmm", "batch": 32, "m": 2048, "n": 128, "k": 2048,
                        "dtype": "fp16", "layer": "Llama-3-8B P@V, 32 heads, seq 2048"},
    # linear with bias (addmm)
    "vit_fc1_b8": {"kind": "gemm", "op": "addmm", "m": 1576, "n": 3072, "k": 768, "dtype": "fp16",
                   "layer": "ViT-B/16 mlp.fc1 + bias, batch 8 (8 x 197 tokens)"},
    "vit_qkv_b8": {"kind": "gemm", "op": "addmm", "m": 1576, "n": 2304, "k": 768, "dtype": "fp16",
                   "layer": "ViT-B/16 attn.qkv + bias, batch 8"},
    # a decode linear with bias (predict mode's GEMV reduction covers addmm)
    "phi2_fc1_m1": {"kind": "gemm", "op": "addmm", "m": 1, "n": 10240, "k": 2560, "dtype": "fp16",
                    "layer": "Phi-2 mlp.fc1 + bias, decode M=1"},
    # small models
    "mlp_block": {"kind": "mlp", "tokens": 1024, "d": 2048, "ffn": 5632, "dtype": "bf16",
                  "layer": "TinyLlama-1.1B SwiGLU MLP, 1024 tokens"},
    "attn_proj": {"kind": "attn", "batch": 4, "seq": 512, "d": 2048, "heads": 16, "dtype": "fp16",
                  "layer": "attention: qkv + QK^T/softmax/PV + o, 4 x 512 tokens, d 2048"},
    "vit_block": {"kind": "vit", "batch": 8, "tokens": 197, "d": 768, "heads": 12, "mlp": 3072, "dtype": "bf16",
                  "layer": "ViT-B/16 encoder block, batch 8"},
}
DEFAULT_WORKLOADS = tuple(WORKLOADS)

# ---------------------------------------------------------------- time estimates (H100, 16 cores)
# From bench/RESULTS.md and issue 20: a worker starts in ~5 s (python, torch, CUDA, profiler);
# compile of one GEMM: plain ~2 s, max-autotune DEFAULT 4-19 s, predict ~plain, top-5 ~5 s;
# collector (EXHAUSTIVE, cold kernel cache) 15-45 s per GEMM, 1-6 s once its kernel class
# (op, dtype, layout, bias) is compiled; ~15 s to start (hardware, compile pool).
WORKER_START_S = 18.0  # measured on the H100, 2026-11-25: ~23 s wall per worker around a 2-4 s compile
JOBS = 1  # --jobs: workers overlap their start-up, so each costs WORKER_START_S / JOBS of the part
MEASURE_S = 1.5
COMPILE_EST_S = {"plain": 2.0, "default": 11.0, "diode_predict": 2.5, "diode_predict_cd": 5.0, "diode_top5": 5.0,
                 "exhaustive": 240.0, "diode_exhaustive": 30.0}
COLLECTOR_START_S = 15.0
COLLECTOR_CLASS_S = 40.0
COLLECTOR_CACHED_S = 6.0
FLAG_DEFAULT = 2  # collect/engine.py: ShardRecord.flags bit 1, the config is in Inductor's DEFAULT list


def gemm_count(spec: dict) -> int:
    return {"gemm": 1, "mlp": 3, "attn": 4, "vit": 6}[spec["kind"]]


def estimate_s(mode: str, spec: dict) -> float:
    """Wall seconds of one compile-mode worker (a model's GEMMs add half a GEMM's compile each)."""
    g = gemm_count(spec)
    if mode not in ("plain", "diode_predict_cd") and spec["kind"] == "gemm" and 1 in (spec["m"], spec["n"]):
        mode = "diode_predict"  # M or N = 1: a reduction under max-autotune, nothing is autotuned
    return WORKER_START_S / JOBS + MEASURE_S * (1 + 0.3 * (g - 1)) + COMPILE_EST_S[mode] * (1 + 0.5 * (g - 1))


def collector_class(spec: dict) -> tuple | None:
    """Kernel class the collector compiles once and reuses (sizes are runtime arguments)."""
    if spec["kind"] != "gemm":
        return None
    return (spec["op"], spec["dtype"])


def estimate_collector_s(specs: list[dict]) -> float:
    classes = [collector_class(s) for s in specs if collector_class(s)]
    if not classes:
        return 0.0
    n_cls = len(set(classes))
    return COLLECTOR_START_S + COLLECTOR_CLASS_S * n_cls + COLLECTOR_CACHED_S * (len(classes) - n_cls)


def plan_parts(workloads: list[str], modes: list[str], n: int) -> list[list[str]]:
    """Splits workloads into n parts of similar estimated time: the GEMMs of one collector
    kernel class stay together (so the collector compiles each class once per part), groups
    assigned largest first to the part with the least estimated time."""
    groups: dict = {}
    for w in workloads:
        groups.setdefault(collector_class(WORKLOADS[w]) or ("model", w), []).append(w)
    cm = [m for m in modes if m in COMPILE_MODES]

    def cost(ws):
        c = sum(estimate_s(m, WORKLOADS[w]) for w in ws for m in cm)
        if "collector" in modes:
            c += estimate_collector_s([WORKLOADS[w] for w in ws]) - (COLLECTOR_START_S if any(
                collector_class(WORKLOADS[w]) for w in ws) else 0)
        return c

    order = sorted(groups.values(), key=lambda ws: (-cost(ws), ws[0]))
    costs = [cost(ws) for ws in order]
    parts: list[list[str]] = [[] for _ in range(n)]
    if n ** len(order) <= 200_000:  # few groups: the assignment with the smallest largest part
        import itertools
        best = min(itertools.product(range(n), repeat=len(order)),
                   key=lambda asg: (max(sum(c for c, j in zip(costs, asg) if j == i) for i in range(n)), asg))
        for ws, j in zip(order, best):
            parts[j] += ws
    else:  # largest group first to the least loaded part
        loads = [0.0] * n
        for ws, c in zip(order, costs):
            i = min(range(n), key=lambda j: (loads[j], j))
            parts[i] += ws
            loads[i] += c
    rank = {w: i for i, w in enumerate(workloads)}
    return [sorted(p, key=rank.get) for p in parts]


def estimate_part_s(workloads: list[str], modes: list[str]) -> float:
    t = sum(estimate_s(m, WORKLOADS[w]) for w in workloads for m in modes if m in COMPILE_MODES)
    if "collector" in modes:
        t += estimate_collector_s([WORKLOADS[w] for w in workloads])
    return t


# ---------------------------------------------------------------- workloads

def wire_problem(spec: dict) -> dict | None:
    """The collector's (wire) problem of a GEMM workload, as the shard spec's JSON."""
    if spec["kind"] != "gemm":
        return None
    op = spec["op"]
    p = {"op": {"linear": "mm", "addmm": "addmm", "bmm_nt": "bmm", "bmm": "bmm"}[op],
         "m": spec["m"], "n": spec["n"], "k": spec["k"], "dtype_a": DTYPES[spec["dtype"]]}
    if op in ("bmm", "bmm_nt"):
        p["batch"] = spec["batch"]
    if op in ("linear", "addmm", "bmm_nt"):
        p["trans_b"] = True
    if op == "addmm":
        p["bias"] = "row"
    return p


def build(spec: dict, dtype, device):
    """(callable, args) for a workload; weights are module parameters (static under CUDA
    graphs), activations are arguments. device "meta" builds shapes only (dry run)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    torch.manual_seed(0)

    def rnd(*shape):
        if str(device) == "meta":
            return torch.empty(*shape, device="meta", dtype=dtype)
        return (torch.randn(*shape, device=device) * 0.5).to(dtype)

    def mod(m):
        return m.to(dtype=dtype).eval()

    kind = spec["kind"]
    with torch.device(device):
        if kind == "gemm":
            op, m, n, k = spec["op"], spec["m"], spec["n"], spec["k"]
            if op in ("linear", "addmm"):
                return mod(nn.Linear(k, n, bias=op == "addmm")), (rnd(m, k),)
            b = spec["batch"]
            if op == "bmm_nt":
                return (lambda q, kk: q @ kk.transpose(-1, -2)), (rnd(b, m, k), rnd(b, n, k))
            if op == "bmm":
                return (lambda p, v: torch.bmm(p, v)), (rnd(b, m, k), rnd(b, k, n))
            raise ValueError(f"unknown op {op}")
        if kind == "mlp":  # SwiGLU: down(silu(gate(x)) * up(x)) + x
            d, f = spec["d"], spec["ffn"]

            class MLP(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.gate, self.up, self.down = nn.Linear(d, f, False), nn.Linear(d, f, False), nn.Linear(f, d, False)

                def forward(self, x):
                    return x + self.down(F.silu(self.gate(x)) * self.up(x))

            return mod(MLP()), (rnd(spec["tokens"], d),)
        if kind in ("attn", "vit"):
            b, s, d, h = spec["batch"], spec.get("seq", spec.get("tokens")), spec["d"], spec["heads"]

            class Block(nn.Module):
                def __init__(self, mlp: int = 0):
                    super().__init__()
                    self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
                    if mlp:
                        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
                        self.fc1, self.fc2 = nn.Linear(d, mlp), nn.Linear(mlp, d)
                    self.mlp = mlp

                def attn(self, x):
                    q, k_, v = self.qkv(x).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
                    att = torch.softmax((q @ k_.transpose(-1, -2)) * (d // h) ** -0.5, dim=-1)
                    return self.o((att @ v).transpose(1, 2).reshape(b, s, d))

                def forward(self, x):
                    if not self.mlp:
                        return self.attn(x)
                    x = x + self.attn(self.n1(x))
                    return x + self.fc2(F.gelu(self.fc1(self.n2(x))))

            return mod(Block(spec["mlp"] if kind == "vit" else 0)), (rnd(b, s, d),)
    raise ValueError(f"unknown workload kind {kind}")


def detected_hardware_key() -> str | None:
    """The hardware key `import torch_diode` detects (DIODE_HARDWARE_KEY, else the GPU), asked
    in a subprocess (the driver never imports torch); None where neither names one."""
    code = ("import json; from torch_diode.hook.api import get_detected_hardware as g; "
            "print(json.dumps(g().get('hardware_key')))")
    with tempfile.TemporaryDirectory(prefix="diode_hw_") as tmp:
        rc, out, err, _ = _popen([sys.executable, "-c", code], _env(tmp), 120)
    if rc != 0:
        raise RuntimeError(f"hardware detection failed (rc {rc}): {(err or '')[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def shipped_model_dir(hardware_key: str) -> str | None:
    """The newest model directory (inside its signed bundle) the package ships for the
    hardware: the model `import torch_diode` installs there with no configuration."""
    root = os.path.join(SHIPPED, hardware_key)
    vs = sorted((int(v), v) for v in os.listdir(root) if v.isdigit()) if os.path.isdir(root) else []
    return os.path.join(root, vs[-1][1]) if vs else None


def plain_model_copy(src: str, dst_root: str) -> str:
    """A bundle's model.json + weights.msgpack copied to a plain model directory: the hook
    loads it as named (explicit), with no native client needed for the bundle signatures.
    A plain model directory is used as is."""
    if not os.path.isfile(os.path.join(src, "bundle.json")):
        return os.path.abspath(src)
    dst = os.path.join(dst_root, "diode_model")
    os.makedirs(dst, exist_ok=True)
    for f in ("model.json", "weights.msgpack"):
        shutil.copy2(os.path.join(src, f), os.path.join(dst, f))
    return dst


# ====================================================================== worker (one run)

def _gpu_us(fn, args, reps: int, cold: bool) -> dict:
    """GPU time per call: kernel durations (CUPTI) between markers. Each call is preceded by
    `buf.bitwise_not_()`: a 2 x L2 write when cold (flushes L2), one element when warm; its
    kernel is the call boundary and is not counted. Memcpy time is reported apart."""
    import torch
    from cupti_trace import trace_events

    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20) or (50 << 20)
    buf = torch.zeros((2 * l2) // 4 if cold else 1, dtype=torch.int32, device="cuda")
    step = getattr(torch.compiler, "cudagraph_mark_step_begin", None)

    def call():
        if step is not None:
            step()
        fn(*args)

    for _ in range(5):
        buf.bitwise_not_()
        call()
    torch.cuda.synchronize()
    why = "profiler saw no kernels"
    try:
        events = trace_events(call, buf.bitwise_not_, reps)
        calls, copies, names = per_call(events)
        by_kernel = kernel_breakdown(events)
    except Exception as ex:  # no CUPTI, ...: the fallback below, and say why
        calls, why = [], f"profiler failed: {type(ex).__name__}: {str(ex)[:200]}"
    if not calls or not any(calls):  # fall back to CUDA events over back-to-back calls (launch-bound)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            call()
        e.record()
        e.synchronize()
        return {"us": s.elapsed_time(e) * 1e3 / reps, "fallback": True,
                "method": f"cuda-events back-to-back, warm L2 ({why})"}
    calls.sort()
    return {"us": statistics.median(calls), "p10_us": quantile(calls, 0.1),
            "p90_us": quantile(calls, 0.9), "calls": len(calls),
            "memcpy_us": statistics.median(copies),  # memcpy, memset and ATen fills, not in "us"
            "kernels_per_call": sum(names.values()) / len(calls),
            "kernels": sorted(names, key=lambda k: -names[k])[:8],
            "kernel_us": by_kernel,
            "method": "cupti kernel sum, " + ("cold L2" if cold else "warm L2")}


def _cpu_us(fn, args, reps: int, cold: bool) -> dict:
    """--smoke-cpu only: median wall time per call (us)."""
    for _ in range(2):
        fn(*args)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        ts.append((time.perf_counter() - t0) * 1e6)
    return {"us": statistics.median(ts), "method": "cpu wall (smoke)"}


def is_fill(kernel_name: str) -> bool:
    """An ATen fill kernel (FillFunctor: a CUDA graph's replay prologue on some torch versions;
    no workload here fills eagerly): counted with the copies, never as GEMM time."""
    return "FillFunctor" in kernel_name


def kernel_breakdown(events: list[dict], top: int = 8) -> dict:
    """Kernel name -> median GPU time per call (us; a kernel launched twice in a call counts
    both), the `top` costliest, from the same trace as per_call and with its rules (the
    `bitwise_not` marker opens a call; ATen fills are not GEMM time). So two modes whose
    calls run the same kernels but differ in time say which kernel holds the difference
    (2026-11-27, H200: top-5's mlp_block 132 us against plain's 109 us, same kernel names)."""
    from cupti_trace import call_launches, kernel_sums
    calls = [{n: us for n, us in kernel_sums(launches).items() if not is_fill(n)}
             for launches in call_launches(events)]
    if not calls:
        return {}
    names = {n for c in calls for n in c}
    med = {n: statistics.median(c.get(n, 0.0) for c in calls) for n in names}
    return {n: round(med[n], 3) for n in sorted(med, key=lambda n: -med[n])[:top]}


def per_call(events: list[dict]) -> tuple[list[float], list[float], dict]:
    """From a Chrome trace's events: per call, the summed kernel durations (us) and the summed
    memcpy/memset durations; kernel name -> count. A `bitwise_not` kernel (the L2 flush or
    marker) starts each call and is not counted; anything before the first marker is ignored.
    ATen fill kernels (FillFunctor: a CUDA graph's replay prologue on some torch versions; no
    workload here fills eagerly) go with the copies, not the GEMM time."""
    evs = sorted((e for e in events if e.get("ph") == "X" and str(e.get("cat", "")).lower() in
                  ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e.get("ts", 0))
    calls, copies, names, cur, cp = [], [], {}, None, 0.0
    for e in evs:
        name = str(e.get("name", ""))
        kernel = str(e.get("cat")).lower() == "kernel" and not is_fill(name)
        if kernel and "bitwise_not" in name:
            if cur is not None:
                calls.append(cur)
                copies.append(cp)
            cur, cp = 0.0, 0.0
        elif cur is None:
            continue
        elif kernel:
            cur += float(e.get("dur", 0.0))
            names[name[:120]] = names.get(name[:120], 0) + 1
        else:
            cp += float(e.get("dur", 0.0))
    if cur is not None:
        calls.append(cur)
        copies.append(cp)
    return calls, copies, names


def _choice_label(choice) -> str:
    return str(getattr(choice, "description", "") or getattr(choice, "name", ""))[:200]


def _is_extern(choice) -> bool:
    """ATen/cuBLAS and the other extern kernels (Inductor's ExternKernelCaller), not a Triton template."""
    return type(choice).__name__.startswith("ExternKernel")


def autotune_summary(name: str, timings: dict) -> dict:
    """One autotune as the feedback saver sees it: the winner, and (to tell a benchmark's
    wrong verdict from a bad candidate list) the fastest extern (ATen) choice's own time and
    the four fastest choices, since a run that lost ATen to a Triton config otherwise keeps
    no trace of ATen's timing."""
    ranked = sorted(timings.items(), key=lambda kv: kv[1])
    best = ranked[0] if ranked else (None, None)
    ext = next(((c, t) for c, t in ranked if _is_extern(c)), (None, None))
    return {"op": name, "choices": len(timings), "best_ms": best[1], "best": _choice_label(best[0]),
            "extern_best_ms": ext[1], "extern_best": _choice_label(ext[0]) if ext[0] is not None else None,
            "fastest": [[_choice_label(c)[:120], t] for c, t in ranked[:4]]}


def autotune_note(t: dict) -> str:
    """An autotune in the table's note: its choice count and, where a Triton config beat
    ATen, both times as the autotune measured them (a mis-timed ATen, e.g. 44.7 us for a
    GEMM eager cuBLAS runs in 7.4, shows here: 2026-11-28, H200, l3_kv_m4)."""
    s = f"{t['op']}: {t['choices']} choices"
    if t.get("extern_best_ms") is not None and t.get("best_ms") is not None and t.get("best") != t.get("extern_best"):
        s += f" (Triton won, {t['best_ms'] * 1e3:.1f} us against ATen's {t['extern_best_ms'] * 1e3:.1f} us as timed)"
    return s


def _fake_result(mode: str, workload: str) -> dict:
    """Dry run: deterministic fake numbers that exercise the table and the goals."""
    spec = WORKLOADS[workload]
    h = int(hashlib.sha256(f"{mode}/{workload}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    flops = 2.0 * spec.get("batch", 1) * spec.get("m", spec.get("tokens", 512)) * spec.get("n", 2048) * \
        spec.get("k", spec.get("d", 2048)) * gemm_count(spec)
    base = 4.0 + flops / 500e6  # us at 500 TFLOP/s + 4 us
    gpu = {"plain": 1.12, "default": 1.0, "diode_predict": 0.93, "diode_predict_cd": 0.92, "diode_top5": 0.9,
           "exhaustive": 0.89,
           "diode_exhaustive": 0.9}[mode] * base * (0.98 + 0.04 * h)
    comp = {"plain": 2.0, "default": 12.0, "diode_predict": 2.4, "diode_predict_cd": 4.0, "diode_top5": 5.0,
            "exhaustive": 200.0,
            "diode_exhaustive": 25.0}[mode] * (1 + 0.5 * (gemm_count(spec) - 1)) * (0.9 + 0.2 * h)
    m1 = spec.get("m") == 1
    r = {"mode": mode, "workload": workload, "status": "ok", "fake": True, "compile_s": comp,
         "gpu": {"us": gpu, "method": "fake"}, "gpu_warm": {"us": gpu * 0.9, "method": "fake"},
         "eager": {"us": base * 1.02, "method": "fake"}, "max_abs_err": 0.0, "ref_max_abs": 1.0}
    if mode != "plain":
        r["gemm_autotuned"] = 0 if m1 else gemm_count(spec)
    if mode.startswith("diode"):
        r["diode_stats"] = {"calls": 0 if m1 else gemm_count(spec), "configs_seen": 20, "configs_kept": 1}
    return r


T0 = time.perf_counter()  # the worker's start (this module is its __main__)


class _exclusive:
    """flock(LOCK_EX) on `path` for the `with` block; no lock when path is None."""

    def __init__(self, path):
        self.path, self.fd = path, None
        if path:
            import fcntl
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # closing the only descriptor releases the flock
            self.fd = None


def worker(a) -> dict:
    if a.dry_run:  # no torch here: the driver has built the workloads; this checks the plumbing
        return _fake_result(a.mode, a.workload)
    import torch
    from torch._inductor import config

    res: dict = {"mode": a.mode, "workload": a.workload, "torch": torch.__version__}
    try:
        import triton
        res["triton"] = triton.__version__
    except ImportError:
        res["triton"] = None
    spec = WORKLOADS[a.workload]
    if a.smoke_cpu:  # the worker's real path on CPU with tiny shapes; CPU wall times, not GPU times
        dev, sync, measure = "cpu", (lambda: None), _cpu_us
        spec = {k: (min(v, 4 if k == "heads" else 64) if isinstance(v, int) else v) for k, v in spec.items()}
        res.update(device="cpu (smoke: tiny shapes, wall times)", smoke=True)
    else:
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device: this benchmark needs a GPU (use --dry-run to check the driver)")
        dev, sync, measure = "cuda", torch.cuda.synchronize, _gpu_us
        res["device"] = torch.cuda.get_device_name()
    config.force_disable_caches = True  # cold compile for every mode; the env var covers subprocesses
    dtype = getattr(torch, DTYPES[a.dtype or spec["dtype"]])
    fn, args = build(spec, dtype, dev)
    compile_kwargs = {}
    if a.mode in PREDICT_MODES:
        compile_kwargs["options"] = dict(PREDICT_OPTIONS if a.mode == "diode_predict" else PREDICT_CD_OPTIONS)
        config.max_autotune_gemm_search_space = "DEFAULT"
    elif a.mode != "plain":
        compile_kwargs["mode"] = AUTOTUNE_MODE
        config.max_autotune_gemm_search_space = "EXHAUSTIVE" if a.mode == "exhaustive" else "DEFAULT"
    autotunes = []
    saver_ctx = None
    # The feedback saver first, in every mode: it imports Inductor's lowering stack (~0.8 s on
    # the CPU VM), which every mode then has before its compile clock, and install_s below is
    # torch_diode's own start (model load, verification, hook), not that shared import.
    try:  # the GEMMs Inductor autotuned (benchmarked), and what won there
        from torch_diode import inductor_compat

        def saver(timings, name, inputs, choices):
            autotunes.append(autotune_summary(name, timings))
        saver_ctx = inductor_compat.feedback_saver(saver)
        saver_ctx.__enter__()
    except Exception as e:
        res["feedback_saver_error"] = repr(e)
        saver_ctx = None
    if a.mode.startswith("diode"):
        import torch_diode
        opts = {"mode": "predict"} if a.mode in PREDICT_MODES else {
            "mode": "topk", "top_k": a.top_k, "threshold": a.threshold,
            "search_space": "exhaustive" if a.mode == "diode_exhaustive" else "default"}
        res["diode_options"] = opts
        t_install = time.perf_counter()
        if not torch_diode.install(a.model, **opts):
            raise RuntimeError(f"torch_diode did not load {a.model}: {torch_diode.get_prediction_stats()}")
        res["install_s"] = time.perf_counter() - t_install  # once per process, before the compile clock
    torch._dynamo.reset()
    compiled = torch.compile(fn, **compile_kwargs)
    res["ready_s"] = time.perf_counter() - T0  # start-up: python, torch, CUDA, inputs
    lock = _exclusive(os.environ.get(LOCK_ENV))  # compile + measure: alone on the CPUs' heavy work and the GPU
    res["lock_wait_s"] = time.perf_counter() - T0 - res["ready_s"]
    with lock, torch.no_grad():
        sync()
        prof = _compile_profiler(a.profile)
        t0 = time.perf_counter()
        out = compiled(*args)
        sync()
        res["compile_s"] = time.perf_counter() - t0
        if prof is not None:
            res["compile_profile"] = profile_summary(prof)
        if saver_ctx is not None:
            saver_ctx.__exit__(None, None, None)
        ref = fn(*args)
        res["max_abs_err"] = float((out.float() - ref.float()).abs().max())
        res["ref_max_abs"] = float(ref.float().abs().max())
        del out, ref
        res["gpu"] = measure(compiled, args, a.reps, cold=True)
        if a.warm:
            res["gpu_warm"] = measure(compiled, args, a.reps, cold=False)
        if a.mode in ("plain", "default") or a.eager_all:  # cuBLAS: the same in every mode
            res["eager"] = measure(fn, args, a.reps, cold=True)
    res["autotunes"] = autotunes
    res["worker_s"] = time.perf_counter() - T0
    if a.mode != "plain":
        res["gemm_autotuned"] = len(autotunes)
    if a.mode.startswith("diode"):
        import torch_diode
        res["diode_stats"] = torch_diode.get_prediction_stats()
        if a.mode in PREDICT_MODES:  # predict benchmarks nothing: the hook's calls are the GEMMs it was asked
            res["gemm_autotuned"] = res["diode_stats"].get("calls", 0)
    res["status"] = "ok"
    return res


# ====================================================================== driver

def _compile_profiler(enabled: bool):
    """A running cProfile.Profile when --profile is on (the cold compile only), else None.
    cProfile slows Python ~1.5-2x, so a profiled run's compile_s is not comparable with an
    unprofiled one; its use is where the time goes, mode against mode."""
    if not enabled:
        return None
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
    return prof


def profile_summary(prof, top: int = PROFILE_TOP) -> dict:
    """The profile's top functions by cumulative and by own time, as JSON rows
    [file:line(function), calls, own s, cumulative s] (results.json carries them: the
    device returns few files)."""
    import pstats
    prof.disable()
    st = pstats.Stats(prof)
    rows = []
    for (file, line, fn), (cc, nc, tt, ct, _) in st.stats.items():
        rows.append([f"{file}:{line}({fn})", nc, round(tt, 4), round(ct, 4)])
    by_cum = sorted(rows, key=lambda r: -r[3])[:top]
    by_own = sorted(rows, key=lambda r: -r[2])[:top]
    return {"total_s": round(st.total_tt, 4), "cumulative": by_cum, "own": by_own}


def _env(tmp: str) -> dict:
    env = dict(os.environ)
    env.update(TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"), TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
               TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TORCH_DIODE_AUTO_INSTALL="0",
               PYTHONPATH=PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def _popen(cmd, env, timeout):
    """(rc or None on timeout, stdout, stderr, wall); the child gets its own session so a
    timeout kills the whole group (Inductor's compile workers included)."""
    import signal
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        return None, out, err, time.perf_counter() - t0
    return p.returncode, out, err, time.perf_counter() - t0


def run_one(a, mode: str, workload: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="diode_bench_") as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--mode", mode, "--workload", workload,
               "--reps", str(a.reps), "--top-k", str(a.top_k), "--threshold", str(a.threshold), "--result", out]
        cmd += ["--warm"] * a.warm + ["--eager-all"] * a.eager_all + ["--smoke-cpu"] * a.smoke_cpu
        cmd += ["--profile"] * a.profile
        if a.dtype:
            cmd += ["--dtype", a.dtype]
        if a.model:
            cmd += ["--model", a.model]
        if a.dry_run:
            cmd.append("--dry-run")
        rc, _, stderr, wall = _popen(cmd, _env(tmp), timeout)
        if rc is None:
            return {"mode": mode, "workload": workload, "status": "not_finished", "limit_s": timeout, "wall_s": wall}
        if rc == 0 and os.path.exists(out):
            with open(out) as f:
                r = json.load(f)
            r["wall_s"] = wall
            if r.get("status") == "error":
                r["stderr_tail"] = (stderr or "")[-1500:]
            return r
        return {"mode": mode, "workload": workload, "status": "error", "rc": rc, "wall_s": wall,
                "stderr_tail": (stderr or "")[-3000:]}


def collector_spec(workloads: list[str], shard_id: str, problem_timeout_s: float) -> tuple[dict, list[str]]:
    """Shard spec of the GEMM workloads (EXHAUSTIVE, fp16/bf16 only: no TF32 pass), ordered by
    kernel class so each class compiles once; and the workload of each spec problem."""
    ws = sorted((w for w in workloads if wire_problem(WORKLOADS[w])),
                key=lambda w: (collector_class(WORKLOADS[w]), workloads.index(w)))
    spec = {"shard_id": shard_id, "sweep_id": "bench-e2e", "search_space": "EXHAUSTIVE",
            "problems": [wire_problem(WORKLOADS[w]) for w in ws],
            "timing": {"problem_timeout_s": problem_timeout_s}, "tf32": [False],
            "producer": {"name": "bench/hook_end_to_end.py"}}
    return spec, ws


def run_collector(a, workloads: list[str], out_dir: str, suffix: str, timeout: float) -> list[dict]:
    """One collector subprocess over the GEMM workloads; per workload the best ok record
    (ATen included), the best of Inductor's DEFAULT configs among them, and the problem's wall."""
    spec, ws = collector_spec(workloads, "bench-e2e" + suffix.replace("-", "/"), a.collector_problem_timeout)
    if not ws:
        return []
    with tempfile.TemporaryDirectory(prefix="diode_collect_") as tmp:
        spec_path = os.path.join(tmp, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f, indent=1)
        shard = os.path.join(out_dir or tmp, f"collector{suffix}.msgpack.gz")
        cmd = [sys.executable, "-m", "torch_diode.collect", "--spec", spec_path]
        cmd += ["--dry-run"] if a.dry_run else ["--out", shard, "--deadline-s", str(max(1.0, timeout - 60))]
        rc, stdout, stderr, wall = _popen(cmd, _env(tmp), timeout)
        log_tail = (stderr or "")[-4000:]
        if out_dir and not a.dry_run:
            with open(os.path.join(out_dir, f"collector{suffix}.log"), "w") as f:
                f.write(f"$ {' '.join(cmd)}\nrc={rc} wall={wall:.1f}s\n{stderr or ''}")
        if a.dry_run:  # the spec is valid and enumerates; timings are fake
            ok = rc == 0
            counts = [ln.split("\t") for ln in (stdout or "").splitlines() if ln and not ln.startswith("total")]
            res = []
            for i, w in enumerate(ws):
                r = _fake_result("exhaustive", w) if ok else {"status": "error"}
                res.append({"mode": "collector", "workload": w, "status": "ok" if ok else "error", "fake": True,
                            "rc": rc, "compile_s": r.get("compile_s"), "gpu": {"us": r.get("gpu", {}).get("us", 0) *
                                                                              0.99, "method": "fake"},
                            "configs_offered": int(counts[i][2]) if ok and i < len(counts) else None,
                            "best_config": "fake", "stderr_tail": None if ok else log_tail})
            return res
        return parse_collector(shard, ws, rc, wall, log_tail)


def parse_collector(shard: str, ws: list[str], rc, wall: float, log_tail: str) -> list[dict]:
    from torch_diode import wire
    from torch_diode.model import is_aten_template
    base = {"mode": "collector", "rc": rc, "collector_wall_s": wall}
    if not os.path.exists(shard):
        return [dict(base, workload=w, status="error" if rc is not None else "not_finished", stderr_tail=log_tail)
                for w in ws]
    import gzip
    with open(shard, "rb") as f:
        data = f.read()
    s = wire.decode_shard(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    walls = {}
    try:
        with open(shard + ".stats.json") as f:
            walls = {p["index"]: p for p in json.load(f)["problems"]}
    except Exception:
        pass
    want = {json.dumps(wire_problem(WORKLOADS[w]), sort_keys=True): (i, w) for i, w in enumerate(ws)}
    out = {}
    for pi, p in enumerate(s.problems):
        d = wire.to_json(p)
        key = None
        for k, (i, w) in want.items():
            q = json.loads(k)
            if all(d.get(f) == v for f, v in q.items()):
                key = (i, w)
                break
        if key is None:
            continue
        recs = [r for r in s.records if r.problem_index == pi]
        ok = [r for r in recs if r.status == "ok" and r.median_us > 0]
        if not ok:
            out[key[1]] = dict(base, workload=key[1], status="error", error="no ok record")
            continue
        best = min(ok, key=lambda r: r.median_us)
        dflt = [r for r in ok if r.flags & FLAG_DEFAULT and r.config.template != "aten"]
        aten = [r for r in ok if is_aten_template(r.config.template)]
        triton = [r for r in ok if r.config.template.startswith("triton")]
        st = walls.get(key[0], {})
        out[key[1]] = dict(base, workload=key[1], status="ok", compile_s=st.get("wall_s"),
                           gpu={"us": best.median_us, "method": "collector: cuda events + gpu spin, cold L2"},
                           best_config=_cfg(best.config), best_is_aten=best in aten,
                           aten_us=min((r.median_us for r in aten), default=None),
                           triton_best_us=min((r.median_us for r in triton), default=None),
                           default_best_us=min((r.median_us for r in dflt), default=None),
                           configs_offered=len(recs), configs_ok=len(ok), lowered_as=st.get("lowered_as"))
    return [out.get(w) or dict(base, workload=w, status="not_finished" if rc in (None, 5) else "error",
                               stderr_tail=log_tail) for w in ws]


def _cfg(c) -> str:
    if c.template == "aten" or c.template.startswith("aten"):
        return c.template
    return f"{c.template} {c.block_m}x{c.block_n}x{c.block_k} g{c.group_m} s{c.num_stages} w{c.num_warps}"


# ---------------------------------------------------------------- table and goals

# GOALS (name -> metric, threshold, what) is a data constant at the top of this file.
_GOAL_ROWS = tuple((name, *v) for name, v in GOALS.items())


# What each predict goal reads: (ratio, GEMM workloads only). One table for diode_predict and
# for the predict_cd rows (the same goals judged on diode_predict_cd, where it ran).
PREDICT_GOAL_KEYS = {
    "predict_compile_vs_plain": ("compile_x_plain", False),
    "predict_compile_vs_default": ("compile_x_default", False),
    "predict_gpu_vs_default": ("gpu_x_default", True),
    "predict_gpu_vs_best": ("gpu_x_best", True),
    "predict_gpu_vs_cublas_max": ("gpu_x_cublas", False),
}
CD_PREFIX = "predict_cd_"

ORACLE = "oracle_gpu_vs_default@info"
ORACLE_ROW = ((ORACLE, "geomean", 0.90,
               "min(best, DEFAULT GPU) / DEFAULT GPU (GEMMs): the lowest predict_gpu_vs_default any "
               "selector could reach on these workloads (information, not a goal)"),)


def _gpu(r):
    return (r or {}).get("gpu", {}).get("us") if (r or {}).get("status") == "ok" else None


def _comp(r):
    return (r or {}).get("compile_s") if (r or {}).get("status") == "ok" else None


def summarize(results: list[dict], workloads: list[str]) -> dict:
    """Per workload: eager cuBLAS and best references, and per mode the ratios the table and
    the goals use; then the goals."""
    by = {(r["workload"], r["mode"]): r for r in results}
    rows = {}
    for w in workloads:
        eager = next((by[(w, m)]["eager"]["us"] for m in ("plain", "default", "diode_predict", "diode_top5")
                      if by.get((w, m), {}).get("status") == "ok" and by[(w, m)].get("eager", {}).get("us")), None)
        coll = _gpu(by.get((w, "collector")))
        best = min((x for x in (coll, eager) if x), default=None) if WORKLOADS[w]["kind"] == "gemm" else None
        d, p = by.get((w, "default")), by.get((w, "plain"))
        modes = {}
        for (ww, m), r in by.items():
            if ww != w:
                continue
            g, c = _gpu(r), _comp(r)
            if m == "collector":  # its "compile s" is the problem's collection wall: no compile ratios
                c = None
            modes[m] = {"compile_s": _comp(r), "gpu_us": g, "compile_x_plain": ratio(c, _comp(p)),
                        "compile_x_default": ratio(c, _comp(d)), "gpu_x_default": ratio(g, _gpu(d)),
                        "gpu_x_best": ratio(g, best), "gpu_x_cublas": ratio(g, eager)}
        tuned = (d or {}).get("gemm_autotuned")
        rows[w] = {"eager_us": eager, "collector_best_us": coll, "best_us": best,
                   "default_autotuned": None if tuned is None else tuned > 0,
                   "best_source": None if best is None else ("collector" if best == coll else "cublas"),
                   "gemm": WORKLOADS[w]["kind"] == "gemm", "modes": modes}
    return {"rows": rows, "goals": goals(rows), "modes": mode_geomeans(rows)}


def mode_geomeans(rows: dict) -> dict:
    """Per compile mode, geomeans over every workload that has the ratio (GEMMs and models
    alike): the figures that choose the hook's default mode (docs/hook.md, Modes)."""
    out = {}
    for m in ("plain", "diode_predict", "diode_predict_cd", "diode_top5"):
        if m == "diode_predict_cd" and not any(m in r["modes"] for r in rows.values()):
            continue  # an opt-in mode: a row only when it ran
        out[m] = {}
        for key in ("gpu_x_default", "compile_x_plain", "compile_x_default"):
            xs = [x for r in rows.values() if (x := r["modes"].get(m, {}).get(key)) is not None]
            out[m][key] = {"geomean": geomean(xs) if xs else None, "n": len(xs)}
    return out


def goals(rows: dict) -> list[dict]:
    def col(mode, key, gemm_only):
        return [r["modes"].get(mode, {}).get(key) for r in rows.values() if r["gemm"] or not gemm_only]

    vals = {g: col("diode_predict", key, gemm_only) for g, (key, gemm_only) in PREDICT_GOAL_KEYS.items()}
    vals.update({
        "top5_gpu_vs_cublas_max": col("diode_top5", "gpu_x_cublas", False),
        "top5_gpu_vs_best": col("diode_top5", "gpu_x_best", True),
    })
    # information, not goals: the GEMM ratios over the workloads where max-autotune DEFAULT
    # autotuned a GEMM template (M = 1 is a reduction there, the hook is not asked)
    tuned = [r for r in rows.values() if r["gemm"] and r.get("default_autotuned")]
    for name, mode, key in (("predict_gpu_vs_default", "diode_predict", "gpu_x_default"),
                            ("predict_gpu_vs_best", "diode_predict", "gpu_x_best"),
                            ("top5_gpu_vs_best", "diode_top5", "gpu_x_best")):
        vals[name + "@autotuned"] = [r["modes"].get(mode, {}).get(key) for r in tuned]
    # information: the oracle, the lowest predict_gpu_vs_default any selector could reach here,
    # choosing per GEMM workload the faster of the best reference and DEFAULT's own pick
    vals[ORACLE] = []
    for r in rows.values():
        if r["gemm"]:
            d = r["modes"].get("default", {}).get("gpu_us")
            vals[ORACLE].append(ratio(min(r["best_us"], d), d) if r["best_us"] and d else None)
    # The same predict goals for predict + coordinate descent, where that opt-in mode ran: the
    # alternative predict configuration (docs/hook.md, Modes), judged side by side on one run.
    cd_goals = ()
    if any("diode_predict_cd" in r["modes"] for r in rows.values()):
        for g, m, t, w in _GOAL_ROWS:
            if g in PREDICT_GOAL_KEYS:
                name = CD_PREFIX + g[len("predict_"):]
                vals[name] = col("diode_predict_cd", *PREDICT_GOAL_KEYS[g])
                cd_goals += ((name, m, t, w.replace("diode_predict", "diode_predict_cd")),)
    out = []
    for name, metric, thr, what in _GOAL_ROWS + tuple(
            (g + "@autotuned", m, t, w.replace("(GEMMs)", "").replace("(GEMM workloads)", "") +
             "(GEMMs that DEFAULT autotuned; information)")
            for g, m, t, w in _GOAL_ROWS if g + "@autotuned" in vals) + cd_goals + ORACLE_ROW:
        xs = [x for x in vals[name] if x is not None]
        v = (geomean(xs) if metric == "geomean" else max(xs)) if xs else None
        res = "N/A" if v is None else ("PASS" if v <= thr else "FAIL")
        if name == ORACLE:  # a bound, never a goal: no PASS/FAIL
            res = "info"
        elif "@" in name:
            res = f"info: {res.lower()}"
        out.append({"goal": name, "metric": metric, "value": v, "threshold": thr, "n": len(xs),
                    "of": len(vals[name]), "what": what, "result": res})
    return out


def _f(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def table_md(results: list[dict], workloads: list[str], modes: list[str], meta: dict) -> str:
    s = summarize(results, workloads)
    by = {(r["workload"], r["mode"]): r for r in results}
    fake = any(r.get("fake") for r in results)
    lines = []
    if fake:
        lines += ["**DRY RUN: every number below is FAKE (synthetic), not a measurement.**", ""]
    if any(r.get("smoke") for r in results):
        lines += ["**CPU SMOKE RUN: tiny shapes, CPU wall times: not a measurement.**", ""]
    lines += [f"torch_diode end-to-end: {meta.get('device') or '?'}, torch {meta.get('torch') or '?'}, "
              f"triton {meta.get('triton') or '?'}, model {meta.get('model_id') or meta.get('model')}"
              + (f" (for {meta['model_hardware_key']})" if meta.get("model_hardware_key") else "") + "; "
              f"GPU us = median per call of the kernels' CUPTI durations, cold L2; compile s = first call, cold "
              f"caches (collector rows: the problem's collection wall, all ~1,400 configs); best = min(collector "
              f"EXHAUSTIVE incl. ATen, eager cuBLAS); x = ratio; GEMM autotuned = GEMMs Inductor autotuned "
              f"(diode_predict: GEMMs the hook was asked), 'no' = none (M = 1 is a reduction under max-autotune).",
              "",
              "| workload | dtype | mode | status | compile s | x plain | x DEFAULT | GPU us | x DEFAULT | x best "
              "| x cuBLAS | GEMM autotuned | pick / note |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for w in workloads:
        row = s["rows"][w]
        dt = WORKLOADS[w]["dtype"]
        lines.append(f"| {w} | {dt} | eager (cuBLAS) | {'ok' if row['eager_us'] else '-'} | - | - | - | "
                     f"{_f(row['eager_us'])} | - | {_f(ratio(row['eager_us'], row['best_us']), '.3f')} | 1.000 | - | "
                     f"{WORKLOADS[w]['layer']}" + (f"; best {row['best_us']:.2f} us from {row['best_source']}"
                                                if row["best_us"] else "") + " |")
        for m in modes:
            r = by.get((w, m))
            if r is None:
                continue
            x = row["modes"].get(m, {})
            st = r.get("status", "?")
            if st == "not_finished":
                st = f">{r.get('limit_s', 0):.0f}s"
            tuned = r.get("gemm_autotuned")
            tuned = "-" if tuned is None else (f"yes ({tuned})" if tuned else "no")
            note = ""
            if m == "collector":
                note = r.get("best_config") or ""
                if r.get("default_best_us"):
                    note += f"; DEFAULT-list best {r['default_best_us']:.2f} us"
            elif r.get("autotunes"):
                note = "; ".join(autotune_note(t) for t in r["autotunes"][:3])
            ds = r.get("diode_stats")
            if ds and m != "collector":
                note = (f"hook calls {ds.get('calls')}, kept {ds.get('configs_kept')}/{ds.get('configs_seen')}"
                        + (f", predicted {json.dumps(ds.get('predicted'))}" if m in PREDICT_MODES else "")
                        + (f", GEMV {json.dumps(ds.get('gemv'))}" if ds.get("gemv") else "")
                        + (f", passthrough {json.dumps(ds.get('passthrough'))}" if ds.get("passthrough") else "")
                        + (f", fallbacks {json.dumps(ds.get('fallbacks'))}" if ds.get("fallbacks") else "")
                        + (f"; {note}" if note else ""))
            if (r.get("gpu") or {}).get("fallback"):
                note = f"GPU us NOT kernel time: {r['gpu']['method']}; {note}"
            if st == "error":
                note = (r.get("error") or (r.get("stderr_tail") or "")[-160:]).replace("\n", " ").replace("|", "/")
            lines.append(f"| {w} | {dt} | {m} | {st} | {_f(x.get('compile_s'))} | "
                         f"{_f(x.get('compile_x_plain'), '.3f')} | {_f(x.get('compile_x_default'), '.3f')} | "
                         f"{_f(x.get('gpu_us'))} | {_f(x.get('gpu_x_default'), '.3f')} | "
                         f"{_f(x.get('gpu_x_best'), '.3f')} | {_f(x.get('gpu_x_cublas'), '.3f')} | {tuned} | "
                         f"{note[:200]} |")
    lines += ["", "| goal | value | threshold | workloads | result | what |", "|---|---|---|---|---|---|"]
    for g in s["goals"]:  # goals first, then the information rows (result "info: ..."; the oracle "info")
        thr = f"(goal <= {g['threshold']})" if g["goal"] == ORACLE else f"<= {g['threshold']}"
        lines.append(f"| {g['goal']} | {_f(g['value'], '.3f')} ({g['metric']}) | {thr} | "
                     f"{g['n']}/{g['of']} | **{g['result']}** | {g['what']} |")
    lines += ["", "| mode (all workloads, geomean) | GPU / DEFAULT | compile / plain | compile / DEFAULT |",
              "|---|---|---|---|"]
    for m, v in s["modes"].items():
        lines.append(f"| {m} | " + " | ".join(f"{_f(v[k]['geomean'], '.3f')} ({v[k]['n']})" for k in
                                               ("gpu_x_default", "compile_x_plain", "compile_x_default")) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- other entry points

class MmKtc:
    """What the hook reads from an Inductor KernelTemplateChoice of triton::mm (CPU stand-in,
    for the ranking-time scripts): the template uid, the params' kwargs, ALLOW_TF32 off."""

    def __init__(self, kw: dict):
        self.template = types.SimpleNamespace(uid="triton::mm")
        self.params = types.SimpleNamespace(to_kwargs=lambda: dict(kw))
        self.extra_kwargs = {"ALLOW_TF32": False}


def rank_timing(a) -> dict:
    """CPU: time for the hook to rank Inductor's EXHAUSTIVE triton::mm list for one problem."""
    sys.path.insert(0, PYTHON_DIR)
    import torch

    from torch_diode.collect.enumerate import mm_configs
    from torch_diode.hook import extract
    from torch_diode.hook.ranking import Options, Ranker, select
    from torch_diode.model import load_model_dir
    from torch_diode.wire import Problem

    model_dir = a.model
    if not model_dir:  # a random model of the documented example size (256 hidden, 3 blocks)
        sys.path.insert(0, os.path.join(REPO, "tests", "python"))
        from test_hook_model import write_model_dir
        model_dir = write_model_dir(tempfile.mkdtemp(prefix="diode_rank_"), hidden=256, blocks=3)
    model = load_model_dir(model_dir)
    p = Problem(op="mm", m=1024, n=4096, k=2048, dtype_a="bfloat16", dtype_b="bfloat16", dtype_out="bfloat16")
    raw = mm_configs(p.m, p.n, p.k, 2, "EXHAUSTIVE")

    ktcs = [MmKtc(c) for c in raw]
    rows = []
    for _ in range(a.reps):
        r = Ranker(model)
        t0 = time.perf_counter()
        configs = [extract.config_from_ktc(k) for k in ktcs]
        t1 = time.perf_counter()
        x = r.features(p, configs)
        t2 = time.perf_counter()
        s = r._forward(x)
        t3 = time.perf_counter()
        select(s, Options())
        t4 = time.perf_counter()
        r2 = Ranker(model)
        t5 = time.perf_counter()
        s2, hit, _ = r2.score(p, configs)   # what the handler calls: a miss ...
        select(s2, Options())
        t6 = time.perf_counter()
        _, hit2, _ = r2.score(p, configs)   # ... then a hit
        t7 = time.perf_counter()
        assert not hit and hit2
        rows.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t1 - t0 + t6 - t5, t7 - t6))
    med = [statistics.median(c) * 1e3 for c in zip(*rows)]
    return {"configs": len(configs), "torch_threads": torch.get_num_threads(),
            "arch": vars(model.info.architecture), "extract_ms": med[0], "features_ms": med[1],
            "forward_ms": med[2], "select_ms": med[3], "total_ms": med[4], "cache_hit_ms": med[5],
            "reps": a.reps}


def check_dataset(path: str, workloads: list[str]) -> list[str]:
    """Workloads whose GEMM problem (op, batch, m, n, k, dtype, layout, bias) is in the dataset."""
    sys.path.insert(0, PYTHON_DIR)
    from torch_diode import wire
    from torch_diode.dataset import load_dataset
    keys = ("op", "batch", "m", "n", "k", "dtype_a", "trans_a", "trans_b", "bias")
    seen = {tuple(wire.to_json(p).get(k) for k in keys) for s in load_dataset(path).shards for p in s.problems}
    hits = []
    for w in workloads:
        wp = wire_problem(WORKLOADS[w])
        if wp:
            full = wire.to_json(wire.Problem(**{**wp, "dtype_b": wp["dtype_a"], "dtype_out": wp["dtype_a"]}))
            if tuple(full.get(k) for k in keys) in seen:
                hits.append(w)
    return hits


def preflight(a, workloads: list[str]) -> dict:
    """In a subprocess (torch imported there, not in the driver): the hook imports, the model
    loads, every workload builds (on the meta device: shapes only) and runs eagerly."""
    code = (
        "import json,sys; sys.path.insert(0, %r); import hook_end_to_end as b; import torch\n"
        "import torch_diode.hook.api; from torch_diode.hook import compat\n"
        "r={'torch': torch.__version__, 'cuda': torch.cuda.is_available(), 'finalize_hook': compat.finalize_hook_name(),"
        " 'has_choices_config': compat.has_choices_config(), 'workloads': {}}\n"
        "m=%r\n"
        "if m:\n"
        "    from torch_diode.model import load_model_dir\n"
        "    i=load_model_dir(m).info; r['model_id']=i.model_id[:16]; r['model_hardware_key']=i.hardware_key\n"
        "for w in %r:\n"
        "    s=b.WORKLOADS[w]; fn,args=b.build(s, getattr(torch, b.DTYPES[%r or s['dtype']]), 'meta')\n"
        "    r['workloads'][w]=list(fn(*args).shape)\n"
        "print(json.dumps(r))\n") % (HERE, a.model, list(workloads), a.dtype)
    with tempfile.TemporaryDirectory(prefix="diode_pre_") as tmp:
        rc, out, err, wall = _popen([sys.executable, "-c", code], _env(tmp), 300)
    if rc != 0:
        return {"status": "error", "rc": rc, "stderr_tail": (err or "")[-3000:]}
    r = json.loads(out.strip().splitlines()[-1])
    r.update(status="ok", wall_s=wall)
    return r


def _write(out_dir: str, suffix: str, payload: dict, table: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    for name, text in ((f"results{suffix}.json", json.dumps(payload, indent=1)), (f"table{suffix}.md", table)):
        tmp = os.path.join(out_dir, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out_dir, name))


def merge(paths: list[str], out_dir: str | None) -> int:
    results, workloads, modes, meta = [], [], [], {}
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        for r in d["results"]:  # a later file's row replaces an earlier one (a re-run), unless it was not run
            key = (r.get("workload"), r.get("mode"))
            old = [i for i, x in enumerate(results) if (x.get("workload"), x.get("mode")) == key]
            if old and r.get("status") in ("skipped_budget", "not_finished"):
                continue
            for i in reversed(old):
                results.pop(i)
            results.append(r)
        workloads += [w for w in d["meta"]["workloads"] if w not in workloads]
        modes += [m for m in d["meta"]["modes"] if m not in modes]
        meta = {**d["meta"], **{k: v for k, v in meta.items() if v}}
    meta["merged_from"] = paths
    table = table_md(results, workloads, modes, meta)
    print(table)
    if out_dir:
        _write(out_dir, "", {"meta": meta, "complete": True, "results": results,
                             "summary": summarize(results, workloads)}, table)
        print(f"wrote {out_dir}/results.json, table.md")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="shipped",
                    help="torch_diode model or bundle directory; 'shipped' (default): the package's newest "
                         "bundle for the detected hardware (DIODE_HARDWARE_KEY, else the GPU; "
                         f"{CPU_HARDWARE_KEY} on the CPU paths), its model files used as a plain model directory")
    ap.add_argument("--out", help="output directory (results*.json, table*.md, the collector's shard)")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"comma list of {MODES}")
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS), help=f"comma list of {list(WORKLOADS)}")
    ap.add_argument("--part", default="1/1", help="i/n: run the i-th of n parts of the workloads (plan_parts)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), help="override every workload's dtype")
    ap.add_argument("--reps", type=int, default=30, help="profiled calls per GPU-time measurement")
    ap.add_argument("--jobs", type=int, default=1,
                    help="workers at a time (start-up and teardown overlap; compile + measure hold one lock)")
    ap.add_argument("--warm", action="store_true", help="also measure GPU time with a warm L2")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile each cold compile; results.json rows get compile_profile (top functions "
                         "by cumulative and own time; profiled compile times run ~1.5-2x slow)")
    ap.add_argument("--eager-all", action="store_true",
                    help="time eager cuBLAS in every mode's worker (default: plain and default only)")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--threshold", type=float, default=0.0,
                    help="diode_top5: also keep configs predicted within this fraction of the best (0: top-k only)")
    ap.add_argument("--timeout", type=float, default=240, help="limit per compile-mode run (s)")
    ap.add_argument("--exhaustive-timeout", type=float, default=300, help="limit per EXHAUSTIVE Inductor run (s)")
    ap.add_argument("--collector-s", type=float, default=300, help="at most this long for the collector run (s)")
    ap.add_argument("--collector-problem-timeout", type=float, default=90,
                    help="collector: per-problem limit (spec timing.problem_timeout_s)")
    ap.add_argument("--budget-s", type=float, default=530,
                    help="stop starting runs after this much wall time (default fits a 10-minute device call)")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU: build every workload, run the whole driver with fake timings, print the table")
    ap.add_argument("--smoke-cpu", action="store_true",
                    help="CPU: run the workers' real compile path on tiny shapes (no collector; times are CPU "
                         "wall, meaningless): checks the worker code before a GPU call")
    ap.add_argument("--skip-done", metavar="RESULTS_JSON",
                    help="skip the (workload, mode) runs that are ok in this earlier results file "
                         "(join the two with --merge afterwards)")
    ap.add_argument("--merge", nargs="+", metavar="RESULTS_JSON", help="join parts' results into one table")
    ap.add_argument("--check-dataset", metavar="DIR", help="report workloads whose problems are in this dataset")
    ap.add_argument("--rank-timing", action="store_true", help="CPU: time ranking ~1,400 configs, then exit")
    # worker-only arguments
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.worker:
        try:
            res = worker(a)
        except Exception as e:
            res = {"mode": a.mode, "workload": a.workload, "status": "error",
                   "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        with open(a.result, "w") as f:
            json.dump(res, f)
        return 0
    if a.merge:
        return merge(a.merge, a.out)
    if a.rank_timing:
        a.reps = min(a.reps, 10)
        a.model = None if a.model == "shipped" else a.model
        print(json.dumps(rank_timing(a), indent=1))
        return 0

    modes = [ALIASES.get(m, m) for m in a.modes.split(",") if m]
    if a.smoke_cpu:
        modes = [m for m in modes if m != "collector"]
    workloads = [w for w in a.workloads.split(",") if w]
    bad = [m for m in modes if m not in MODES] + [w for w in workloads if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown modes/workloads: {bad}")
    if a.check_dataset:
        hits = check_dataset(a.check_dataset, workloads)
        print(f"{len(hits)} of {len(workloads)} workloads have a problem in {a.check_dataset}: {hits}")
        return 1 if hits else 0
    global JOBS
    JOBS = max(1, a.jobs)
    try:
        pi, pn = (int(x) for x in a.part.split("/"))
        assert 1 <= pi <= pn
    except Exception:
        ap.error(f"--part {a.part}: expected i/n with 1 <= i <= n")
    parts = plan_parts(workloads, modes, pn)
    plan = [{"part": f"{i + 1}/{pn}", "workloads": p, "estimate_s": round(estimate_part_s(p, modes))}
            for i, p in enumerate(parts)]
    workloads = parts[pi - 1]
    if not workloads:
        print(f"part {a.part}: no workloads in this part")
        return 0
    suffix = f"-part{pi}of{pn}" if pn > 1 else ""
    print(f"plan ({', '.join(modes)}): " + "; ".join(f"part {p['part']} ~{p['estimate_s']} s: "
                                                   f"{','.join(p['workloads'])}" for p in plan), flush=True)

    work_dir = tempfile.mkdtemp(prefix="diode_e2e_")
    try:
        if a.model == "shipped":
            cpu_only = a.dry_run or a.smoke_cpu
            hw = CPU_HARDWARE_KEY if cpu_only else detected_hardware_key()
            src = shipped_model_dir(hw) if hw else None
            if src is None and any(m.startswith("diode") for m in modes):
                ap.error(f"no shipped model for hardware {hw!r} under {SHIPPED}: pass --model DIR")
            a.model = plain_model_copy(src, work_dir) if src else None
            model_src = src
        elif a.model:
            if not os.path.isfile(os.path.join(a.model, "model.json")):
                ap.error(f"--model {a.model}: no model.json there")
            model_src, a.model = a.model, plain_model_copy(a.model, work_dir)
        else:
            model_src = None
        if any(m.startswith("diode") for m in modes) and not a.model:
            ap.error("the diode modes need a model (--model DIR)")
        return _drive(a, modes, workloads, suffix, plan, model_src)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _drive(a, modes, workloads, suffix, plan, model_src) -> int:
    start = time.perf_counter()
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    pre = preflight(a, workloads)
    print(f"preflight: {pre.get('status')} torch={pre.get('torch')} cuda={pre.get('cuda')} "
          f"model={pre.get('model_id')} ({pre.get('model_hardware_key')}) hook={pre.get('finalize_hook')} "
          f"[{time.perf_counter() - start:.1f}s]" + (f"\n{pre.get('stderr_tail')}" if pre.get("status") != "ok" else ""),
          flush=True)
    if pre.get("status") != "ok":
        return 1
    meta = {"argv": sys.argv, "part": a.part, "plan": plan, "modes": modes, "dry_run": a.dry_run,
            "workloads": {w: WORKLOADS[w] for w in workloads}, "dtype_override": a.dtype, "model": model_src,
            "model_id": pre.get("model_id"), "model_hardware_key": pre.get("model_hardware_key"),
            "reps": a.reps, "top_k": a.top_k, "threshold": a.threshold,
            "budget_s": a.budget_s, "torch": pre.get("torch")}
    results: list[dict] = []

    def save(done: bool):
        if a.out:  # after every run, so a killed call still leaves what finished
            for r in results:
                if r.get("device"):
                    meta.update(device=r["device"], torch=r.get("torch"), triton=r.get("triton"))
                    break
            _write(a.out, suffix, {"meta": meta, "complete": done, "results": results,
                                   "summary": summarize(results, workloads)},
                   table_md(results, workloads, modes, meta))

    # Order: the GEMM workloads' compile modes (cheap first, DEFAULT last), then the collector
    # (the "best" reference of three goals), then the small models, then Inductor's own
    # EXHAUSTIVE runs. The collector gets at most --collector-s and leaves the models their
    # estimated time, but has at least 120 s; whatever overruns --budget-s is skipped_budget.
    cm = [m for m in ("plain", "diode_predict", "diode_predict_cd", "diode_top5", "default", "diode_exhaustive")
          if m in modes]
    gemm_ws = [w for w in workloads if WORKLOADS[w]["kind"] == "gemm"]
    model_ws = [w for w in workloads if WORKLOADS[w]["kind"] != "gemm"]
    order = [(w, m) for w in gemm_ws for m in cm]
    if "collector" in modes:
        order.append(("*", "collector"))
    order += [(w, m) for w in model_ws for m in cm]
    order += [(w, "exhaustive") for w in workloads if "exhaustive" in modes]
    done = set()
    if a.skip_done:
        with open(a.skip_done) as f:
            done = {(r.get("workload"), r.get("mode")) for r in json.load(f)["results"] if r.get("status") == "ok"}
        order = [(w, m) for w, m in order if (w, m) not in done]
        print(f"--skip-done: {len(done)} runs ok in {a.skip_done} are not repeated", flush=True)
    models_est = sum(estimate_s(m, WORKLOADS[w]) for w in model_ws for m in cm)
    os.environ[LOCK_ENV] = os.path.join(tempfile.gettempdir(), f"diode_e2e_{os.getpid()}.lock")  # workers inherit it

    def one(w, m):
        left = a.budget_s - (time.perf_counter() - start)
        if left < 20 and not a.dry_run:
            return {"mode": m, "workload": w, "status": "skipped_budget"}
        limit = a.exhaustive_timeout if m == "exhaustive" else a.timeout
        return run_one(a, m, w, min(limit, max(left, 20)))

    def report(w, m, r):
        results.append(r)
        save(False)
        print(f"[{time.perf_counter() - start:7.1f}s] {w} {m}: {r.get('status')} "
              f"compile={_f(r.get('compile_s'))}s gpu={_f(_gpu(r))}us eager={_f((r.get('eager') or {}).get('us'))}us"
              + (f" tuned={r.get('gemm_autotuned')}" if "gemm_autotuned" in r else "")
              + (f" start={_f(r.get('ready_s'), '.1f')}s lock_wait={_f(r.get('lock_wait_s'), '.1f')}s"
                 f" worker={_f(r.get('worker_s'), '.1f')}s" if "ready_s" in r else "")
              + (f" ({r.get('error') or (r.get('stderr_tail') or '')[-300:]})" if r.get("status") == "error" else ""),
              flush=True)

    def batch(pairs):  # --jobs workers at a time; results reported in submission order
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            futs = [(w, m, pool.submit(one, w, m)) for w, m in pairs]
            for w, m, f in futs:
                report(w, m, f.result())

    pairs = []
    for w, m in order:
        if m != "collector":
            pairs.append((w, m))
            continue
        batch(pairs)  # the collector times on the GPU: no worker in flight
        pairs = []
        left = a.budget_s - (time.perf_counter() - start)
        gemms = [x for x in workloads if wire_problem(WORKLOADS[x])]
        if left < 60 and not a.dry_run:
            results.extend({"mode": m, "workload": x, "status": "skipped_budget"} for x in gemms)
            continue
        limit = min(a.collector_s, left, max(120.0, left - models_est / max(1, a.jobs)))
        rs = run_collector(a, [x for x in workloads if (x, "collector") not in done], a.out, suffix,
                           max(limit, 1.0))
        results.extend(rs)
        save(False)
        print(f"[{time.perf_counter() - start:7.1f}s] collector: " + ", ".join(
            f"{r['workload']}={r.get('status')}:{_f(_gpu(r))}us" for r in rs), flush=True)
    batch(pairs)
    save(True)
    print()
    print(table_md(results, workloads, modes, meta))
    if a.out:
        print(f"wrote {a.out}/results{suffix}.json, table{suffix}.md")
    if a.dry_run:
        ok = all(r.get("status") == "ok" for r in results)
        print("dry run:", "OK" if ok else "FAILED", f"({time.perf_counter() - start:.1f}s)")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
