"""Predict mode's third candidate for a GEMM with M = 1 or N = 1: Inductor's own reduction
with a launch configuration read from a measured table, so nothing is benchmarked.

Why: for a matrix-vector product no GEMM config and no cuBLAS call reaches the time of
the reduction that max-autotune makes of it (on the H100, 2026-11-28: 43.8 against 49.9 us
on a 1 x 4096 x 14336 GEMM). Inductor writes that reduction only under
`coordinate_descent_tuning` (its mm decomposition says the reduction reaches peak
bandwidth only when tuned), and coordinate descent then benchmarks every Triton kernel of
the graph: +1.3 s for one GEMM, 2.5x plain's compile on a ViT block.

What this module does, in predict mode only and only where a table for this hardware
says the reduction beats cuBLAS:
1. `mm_as_reduction` wraps Inductor's `aten.mm` decomposition. For an M = 1 / N = 1 mm on
   the GPU whose table entry says so, it calls Inductor's own decomposition with
   `coordinate_descent_tuning` patched on for that call alone (one definition of the
   reduction: Inductor's), and remembers (outputs, K) -> the table's launch config.
   `addmm_as_reduction` does the same for a linear with bias (Inductor never decomposes a
   GPU addmm, not even under coordinate descent): the same mm reduction, then the bias
   added in fp32, which Inductor fuses into the reduction kernel as its epilogue.
2. `fixed_config_kwargs` (called from the handler's `triton_kernel_kwargs`, Inductor's hook
   "used to apply fixed configurations") gives the reduction kernel of that size a
   `FixedTritonConfig`: compiled once, never tuned (Inductor skips coordinate descent for
   fixed configs).

The table (`gemv_tables/<hardware key>.json`, format below) is measured on the GPU by
`bench/gemv_reduction.py` (script removed; git history): for each (dtype, layout, outputs, K) of a grid, a launch config
chosen from those it timed through this hook (its --rule), that config's GPU time and
cuBLAS's. A shape is looked up by its nearest measured entry (log2_distance, at most
MAX_LOG2_DISTANCE); the reduction is used only where that entry's reduction beat cuBLAS by
`margin`. Every refusal leaves Inductor's path as it was.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import tables, zero_config
from .state import PROCESS, active_state

log = logging.getLogger("torch_diode")

TABLE_FORMAT = "torch_diode.gemv_table/1"
TABLE_DIR = Path(__file__).resolve().parent / "gemv_tables"
ENV_TABLE = "TORCH_DIODE_GEMV_TABLE"     # a table file to use instead of the shipped one
DTYPES = ("float16", "bfloat16", "float32")
LAYOUTS = ("inner", "outer")            # the reduction runs along the matrix's contiguous dim, or across it
CONFIG_KEYS = ("XBLOCK", "R0_BLOCK", "num_warps", "num_stages")
ENTRY_KEYS = frozenset({"dtype", "layout", "n", "k", "config", "reduction_us", "cublas_us"})
MAX_DIM = 1 << 24                        # outputs and K of a table entry
MAX_ENTRIES = 4096
MAX_TABLE_BYTES = 4 << 20
MAX_LOG2_DISTANCE = 1.0                  # nearest entry at most one octave away (Euclidean in log2 n, log2 k)
DEFAULT_MARGIN = 0.03                    # the reduction must have beaten cuBLAS by 3% on the nearest entry


class GemvTableError(tables.TableError):
    """A table that is not a valid torch_diode.gemv_table/1 document."""


@dataclass(frozen=True)
class GemvEntry:
    dtype: str
    layout: str
    n: int              # outputs: N for M = 1, M for N = 1
    k: int
    config: tuple       # ((key, value), ...) in CONFIG_KEYS order
    reduction_us: float
    cublas_us: float

    def config_dict(self) -> dict[str, int]:
        return dict(self.config)


def log2_distance(n1: int, k1: int, n2: int, k2: int) -> float:
    """How far apart two matrix-vector shapes are for the table: Euclidean in (log2 outputs,
    log2 K), so one unit is a factor of two in one dimension."""
    return math.hypot(math.log2(n1 / n2), math.log2(k1 / k2))


def _int(obj: dict, key: str, lo: int, hi: int, where: str) -> int:
    return tables.bounded_int(obj, key, lo, hi, where, GemvTableError)


def _us(obj: dict, key: str, where: str) -> float:
    return tables.positive_number(obj, key, "microseconds", where, GemvTableError)


def parse_config(cfg: Any, where: str) -> tuple:
    """A reduction launch config: XBLOCK and R0_BLOCK powers of two, num_warps a power of
    two up to 32, num_stages 1-8; nothing else (a fixed config is passed to Triton as is)."""
    if not isinstance(cfg, dict) or set(cfg) != set(CONFIG_KEYS):
        raise GemvTableError(f"{where}: config must have exactly the keys {CONFIG_KEYS}, got {cfg!r}")
    x = _int(cfg, "XBLOCK", 1, 4096, where)
    r = _int(cfg, "R0_BLOCK", 1, 65536, where)
    w = _int(cfg, "num_warps", 1, 32, where)
    s = _int(cfg, "num_stages", 1, 8, where)
    if not (tables.pow2(x) and tables.pow2(r) and tables.pow2(w)):
        raise GemvTableError(f"{where}: XBLOCK, R0_BLOCK and num_warps must be powers of two, got {cfg!r}")
    return (("XBLOCK", x), ("R0_BLOCK", r), ("num_warps", w), ("num_stages", s))


class GemvTable:
    def __init__(self, hardware: str, entries: list[GemvEntry], digest: str, source: str):
        self.hardware = hardware
        self.entries = entries
        self.digest = digest
        self.source = source

    def nearest(self, dtype: str, layout: str, n: int, k: int) -> tuple[GemvEntry, float] | None:
        best = None
        for e in self.entries:
            if e.dtype != dtype or e.layout != layout:
                continue
            d = log2_distance(n, k, e.n, e.k)
            if best is None or d < best[1] or (d == best[1] and (e.n, e.k) < (best[0].n, best[0].k)):
                best = (e, d)
        return best

    def predict(self, dtype: str, layout: str, n: int, k: int, margin: float = DEFAULT_MARGIN) -> dict | None:
        """The launch config for the reduction of this matrix-vector product, or None when
        no entry is near enough or the nearest entry's reduction did not beat cuBLAS by
        `margin` (then cuBLAS or the model's GEMM pick stays)."""
        if n < 1 or k < 1:
            return None
        hit = self.nearest(dtype, layout, n, k)
        if hit is None or hit[1] > MAX_LOG2_DISTANCE:
            return None
        e = hit[0]
        if e.reduction_us > e.cublas_us * (1.0 - margin):
            return None
        return e.config_dict()


def parse_table(data: bytes, source: str = "<bytes>") -> GemvTable:
    """Strictly parses a table document (bounded size, exact keys, sane values)."""
    hw, _, raw = tables.parse_document(data, source, TABLE_FORMAT, MAX_TABLE_BYTES, MAX_ENTRIES, GemvTableError)
    entries, seen = [], set()
    for i, r in enumerate(raw):
        where = f"{source}: entries[{i}]"
        if not isinstance(r, dict):
            raise GemvTableError(f"{where}: not an object")
        if set(r) - ENTRY_KEYS:
            raise GemvTableError(f"{where}: unknown keys {sorted(set(r) - ENTRY_KEYS)}")
        if r.get("dtype") not in DTYPES or r.get("layout") not in LAYOUTS:
            raise GemvTableError(f"{where}: dtype must be one of {DTYPES} and layout one of {LAYOUTS}")
        e = GemvEntry(r["dtype"], r["layout"], _int(r, "n", 1, MAX_DIM, where), _int(r, "k", 1, MAX_DIM, where),
                      parse_config(r.get("config"), where), _us(r, "reduction_us", where), _us(r, "cublas_us", where))
        key = (e.dtype, e.layout, e.n, e.k)
        if key in seen:
            raise GemvTableError(f"{where}: a second entry for {key}")
        seen.add(key)
        entries.append(e)
    return GemvTable(hw, entries, hashlib.sha256(data).hexdigest()[:16], source)


def load_table(hardware_key: str | None) -> GemvTable | None:
    """The table for this hardware: $TORCH_DIODE_GEMV_TABLE if set, else the shipped
    gemv_tables/<hardware key>.json; None when there is none. A broken table is logged
    once and treated as none (the reduction candidate is then simply not offered)."""
    path_s = os.environ.get(ENV_TABLE, "").strip()
    if path_s:
        path = Path(path_s)
    elif hardware_key and all(c.isalnum() or c in "-_." for c in hardware_key):
        path = TABLE_DIR / f"{hardware_key}.json"
    else:
        return None
    # a shipped table must have been made for this GPU; one the user names is used as given
    return tables.load_once(path, PROCESS.gemv_tables, parse_table, "GEMV table",
                            hardware=None if path_s else hardware_key)


# --------------------------------------------------------------- shapes

def matvec_shape(a: Any, b: Any) -> tuple[str, str, int, int] | None:
    """(dtype, layout, outputs, K) when mm(a, b) is a matrix-vector product Inductor can
    write as a reduction (static shapes, M = 1 or N = 1, same floating dtype, the matrix
    contiguous along one dim), else None. Works on fake tensors."""
    import torch
    try:
        if a.dim() != 2 or b.dim() != 2 or a.dtype != b.dtype or a.device.type != "cuda":
            return None
        m, k = (int(s) if isinstance(s, int) else None for s in a.shape)
        k2, n = (int(s) if isinstance(s, int) else None for s in b.shape)
        if None in (m, k, k2, n) or k != k2 or k < 2:
            return None
        dtype = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}.get(a.dtype)
        if dtype is None:
            return None
        if m == 1 and n > 1:
            outputs, mat, kdim = n, b, 0          # out[j] = sum_k a[0, k] * b[k, j]
        elif n == 1 and m > 1:
            outputs, mat, kdim = m, a, 1          # out[i] = sum_k a[i, k] * b[k, 0]
        else:
            return None
        strides = list(mat.stride())
        if not all(isinstance(s, int) for s in strides):   # symbolic: int() would add a guard
            return None
        if strides[kdim] == 1:
            layout = "inner"
        elif strides[1 - kdim] == 1:
            layout = "outer"
        else:
            return None
        return dtype, layout, outputs, k
    except (TypeError, ValueError, RuntimeError):   # symbolic sizes and strides: not ours
        return None


def _bias_fits(bias: Any, a: Any, b: Any) -> bool:
    """addmm's bias: a tensor of the GEMM's dtype and device, with static sizes that
    broadcast to the (M, N) output (what F.linear passes: (N,))."""
    import torch
    try:
        if not isinstance(bias, torch.Tensor) or bias.dtype != a.dtype or bias.device != a.device:
            return False
        sizes = tuple(bias.shape)
        if not all(isinstance(s, int) for s in sizes) or len(sizes) > 2:
            return False
        out = (int(a.shape[0]), int(b.shape[1]))
        return torch.broadcast_shapes(sizes, out) == out
    except (TypeError, ValueError, RuntimeError):
        return False


# --------------------------------------------------------------- the decomposition

# The planned reductions, (outputs, K) -> launch config, are process state
# (state.PROCESS.planned). The decomposition (AOT tracing) and the codegen that reads them
# (triton_kernel_kwargs) see no common per-compile object, so the key is the reduction's size
# alone: a later reduction of exactly that size (a sum over K of N rows) also gets the config,
# which is a valid launch config for it; fp16 and bf16 GEMVs of one size share the last one
# planned.
_PLANNED_MAX = 4096
# Once per process, not hook state: Inductor's own decompositions that install_decomposition()
# wrapped ("mm", "addmm"), so that they are wrapped once whatever installs and uninstalls follow.
_wrap_lock = threading.Lock()
_wrapped: dict[str, Any] = {}


def planned_config(outputs: int, k: int) -> dict[str, int] | None:
    return PROCESS.planned.get((outputs, k))


def _plan(a: Any, b: Any, bias: Any = None) -> dict | None:
    state = active_state()
    table = state.gemv_table_in_use if state is not None else None
    if table is None:
        return None
    from torch._inductor import config
    if config.coordinate_descent_tuning:       # Inductor decomposes mm and tunes on its own
        return None
    if not zero_config.user_autotunes_gemms(config):
        # plain torch.compile keeps cuBLAS for M = 1: in whole decoders the table's reductions,
        # fused with their neighbours, ran 1.04-1.10x plain on Llama/Mistral decode at batch 1
        # (bench/models.py; docs/decisions/022-no-gemv-under-plain-compile.md)
        state.stats.count_gemv("plain_compile")
        return None
    shape = matvec_shape(a, b)
    if shape is None or (bias is not None and not _bias_fits(bias, a, b)):
        return None
    cfg = table.predict(*shape)
    state.stats.count_gemv("reduction" if cfg else "cublas_or_model")
    if cfg is None:
        return None
    with PROCESS.lock:
        planned = PROCESS.planned
        if len(planned) >= _PLANNED_MAX:
            planned.clear()
        planned[(shape[2], shape[3])] = cfg
    return cfg


def addmm_epilogue(out: Any, bias: Any, beta: Any, alpha: Any, dtype: Any) -> Any:
    """addmm's alpha * (a @ b) + beta * bias from the fp32 product `out`, in fp32, rounded
    once to `dtype`; beta 0 ignores the bias, NaN included (addmm's contract)."""
    import torch
    if alpha != 1:
        out = out * alpha
    if beta != 0:
        b32 = bias.to(torch.float32)
        out = out + (b32 if beta == 1 else b32 * beta)
    return out.to(dtype)


def install_decomposition() -> bool:
    """Wraps Inductor's aten.mm decomposition (and aten.addmm's, for a linear with bias)
    once per process (idempotent). False when this torch has no mm entry (then predict mode
    simply never offers the reduction)."""
    with _wrap_lock:
        if "mm" in _wrapped:
            return True
        try:
            import torch
            from torch._inductor import decomposition as d
        except ImportError:
            return False
        mm_op, addmm_op = torch.ops.aten.mm.default, torch.ops.aten.addmm.default
        orig_mm = d.decompositions.get(mm_op)
        if orig_mm is None:
            return False

        def planned(a, b, bias=None):
            try:
                return _plan(a, b, bias)
            except Exception as e:  # the hook must never break a compile: Inductor's path, counted
                log.debug("torch_diode: GEMV planning failed: %s", e)
                _count("planning_error")
                return None

        def mm_as_reduction(a, b, *args, **kwargs):
            if args or kwargs or planned(a, b) is None:     # out_dtype (2.13): not ours
                return orig_mm(a, b, *args, **kwargs)
            from torch._inductor import config
            with config.patch(coordinate_descent_tuning=True):   # Inductor's own reduction
                return orig_mm(a, b)

        mm_as_reduction.__wrapped__ = orig_mm
        d.decompositions[mm_op] = mm_as_reduction
        _wrapped["mm"] = orig_mm

        orig_addmm = d.decompositions.get(addmm_op)
        if orig_addmm is not None:
            def addmm_as_reduction(bias, a, b, *args, **kwargs):
                # A positional extra (out_dtype on torch 2.13; beta in older signatures) is
                # not ours: only the plain call (F.linear's) and keyword beta / alpha are.
                if args or set(kwargs) - {"beta", "alpha"} or planned(a, b, bias) is None:
                    return orig_addmm(bias, a, b, *args, **kwargs)
                beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
                from torch._inductor import config
                # Inductor's mm reduction on fp32 operands (the casts fuse into its loads, as
                # its own pw_cast_for_opmath does), then alpha * out + beta * bias in fp32 and
                # one rounding to the GEMM's dtype, as cuBLAS's epilogue does.
                with config.patch(coordinate_descent_tuning=True):
                    out = orig_mm(a.to(torch.float32), b.to(torch.float32))
                if out is NotImplemented:   # not a reduction after all: Inductor's addmm
                    return orig_addmm(bias, a, b, *args, **kwargs)
                return addmm_epilogue(out, bias, beta, alpha, a.dtype)

            addmm_as_reduction.__wrapped__ = orig_addmm
            d.decompositions[addmm_op] = addmm_as_reduction
            _wrapped["addmm"] = orig_addmm
        cache_clear = getattr(getattr(d, "fast_random_decomps", None), "cache_clear", None)
        if cache_clear:     # the cached copy of the table that select_decomp_table() returns
            cache_clear()
        return True


def fixed_config_kwargs(features: Any, groups: Any, kernel_cls: Any, kernel_kwargs: dict) -> dict:
    """kernel_kwargs with a FixedTritonConfig for the reduction of a planned matrix-vector
    product (outputs and K as planned, one x and one r dim, not persistent); otherwise
    kernel_kwargs unchanged."""
    planned = PROCESS.planned     # read without the lock: one dict lookup per kernel
    if not planned or kernel_kwargs.get("fixed_config") is not None:
        return kernel_kwargs
    try:
        numel, rnumel = features.numel, features.reduction_numel
        if not (getattr(numel, "is_number", False) and getattr(rnumel, "is_number", False)):
            return kernel_kwargs
        cfg = planned.get((int(numel), int(rnumel)))
        if cfg is None:
            return kernel_kwargs
        tiling = groups[0] if isinstance(groups, (list, tuple)) and groups and isinstance(groups[0], dict) else groups
        if isinstance(tiling, dict) and set(tiling) != {"x", "r0_"}:
            return kernel_kwargs
        from torch._inductor.codegen.triton import FixedTritonConfig
        params = _init_params(kernel_cls)
        if "fixed_config" not in params:
            return kernel_kwargs
        out = dict(kernel_kwargs)
        if "override_persistent_reduction" in params:
            out["override_persistent_reduction"] = False   # the table's configs are looped reductions
        elif int(rnumel) <= 1024:
            return kernel_kwargs
        out["fixed_config"] = FixedTritonConfig(dict(cfg))
        _count("fixed_config")
        return out
    except Exception as e:  # never break codegen: Inductor's own heuristics then, counted
        log.debug("torch_diode: GEMV fixed config not applied: %s", e)
        _count("fixed_config_error")
        return kernel_kwargs


@functools.lru_cache(maxsize=16)
def _init_params(kernel_cls: type) -> frozenset:
    """The keyword names kernel_cls's constructor takes: TritonKernel passes its **kwargs on
    to SIMDKernel, so the whole MRO (once per class, not per kernel)."""
    params = set()
    for klass in getattr(kernel_cls, "__mro__", (kernel_cls,)):
        if "__init__" in vars(klass):
            params |= set(inspect.signature(klass.__init__).parameters)
    return frozenset(params)


def _count(outcome: str) -> None:
    state = active_state()
    if state is not None:
        state.stats.count_gemv(outcome)
