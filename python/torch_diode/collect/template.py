"""Inductor's own Triton GEMM templates, rendered with the sizes as runtime arguments.

Inductor renders `triton_mm.py.jinja` / `triton_bmm.py.jinja` once per problem with
every size and stride baked in as a constant, so each problem compiles every config
anew. The collector renders the *same template source*, read from the running torch
(inductor_compat.gemm_template_source), through its own implementations of the
template's hooks (def_kernel, size, stride, load_input, store_output):

* sizes (M, N, K, BATCH) and strides are kernel arguments, not constants, and are
  not specialised by Triton (`do_not_specialize`), so one compiled kernel serves every
  problem of its kernel class (see `KernelClass`);
* what Inductor's constants let the compiler prove and that matters for speed is kept
  as compile-time facts: a unit stride is the literal `1` (contiguity), every other
  stride is `q * SA` with SA the largest power of two dividing it, capped at one
  16-byte vector (alignment, so vector loads stay legal), and EVEN_K is the same
  Jinja switch Inductor sets;
* the epilogue of addmm/baddbmm is Inductor's addmm_epilogue (acc * alpha + bias * beta,
  bias broadcast by its strides, alpha/beta of 1 left out as Inductor does);
* scaled_mm (FP8 operands, `torch._scaled_mm`) renders the same `triton_mm` template as
  Inductor's lowering does (tuned_scaled_mm, op_name "scaled_mm"): the scales are two
  more pointer arguments (Inductor's suffix_args), the epilogue is Inductor's
  scale_mm_epilogue (acc * (scale_a * scale_b)), each scale loaded as Inductor's epilogue
  codegen loads it (a float32 scalar broadcast to the tile for scale "tensor", scale_a by
  row and scale_b by column for "row"), and USE_FAST_ACCUM is the template's Jinja switch
  with the value Inductor passes.

A *static* kernel class (`kernel_class(..., static=True)`) renders the same template
with one problem's sizes and strides as literals, as Inductor does: one compile per
problem and config, for re-timing a problem's contenders exactly as Inductor would run
them. bench/collector_fidelity.py (script removed; git history) measures both against Inductor's static kernels.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
import os
import re
import sys
from dataclasses import dataclass

from .. import inductor_compat as ic

_DTYPE_SIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1}
VECTOR_BYTES = 16
INT32_MAX = (1 << 31) - 1


def stride_align(stride: int, dtype_size: int) -> int:
    """Largest power of two dividing `stride`, capped at one 16-byte vector of elements.

    0 (a broadcast dimension) divides by anything: it gets the cap."""
    cap = VECTOR_BYTES // dtype_size
    if stride == 0:
        return cap
    a = 1
    while a < cap and stride % (a * 2) == 0:
        a *= 2
    return a


@dataclass(frozen=True)
class Operand:
    """Strides of one 2-D operand (A, B, C or the bias), batch stride first for bmm."""
    strides: tuple[int, ...]

    def pattern(self, dtype_size: int) -> tuple[int, ...]:
        """Per stride: 1 -> literal 1; 0 -> literal 0; else -(alignment)."""
        return tuple(s if s in (0, 1) else -stride_align(s, dtype_size) for s in self.strides)


@dataclass(frozen=True)
class KernelClass:
    """Everything that selects a distinct rendered source (the rest are constexprs or args).

    Problems whose KernelClass and config agree share one compiled kernel."""
    batched: bool               # triton_bmm template vs triton_mm
    dtype: str                  # operands' dtype
    out_dtype: str
    even_k: bool
    a: tuple[int, ...]          # Operand.pattern of A, B, C, bias ((),) when no bias
    b: tuple[int, ...]
    c: tuple[int, ...]
    bias: tuple[int, ...]
    alpha_one: bool
    beta_one: bool
    index_int64: bool
    sizes: tuple[int, ...] = (1, 1, 1)   # alignment of M, N, K (stride_align): mask constancy
    # (batch, M, N, K) of one problem when the class is *static*: sizes and strides are
    # literals of the source, as in the kernel Inductor compiles for that problem (the a, b,
    # c, bias patterns then hold the exact strides). Empty: runtime sizes, the reuse class.
    static: tuple[int, ...] = ()
    # scaled_mm: "tensor" or "row" (the scale epilogue and its two pointer arguments); "" for
    # the GEMM ops. fast_accum: the template's USE_FAST_ACCUM switch (Inductor's value).
    scale: str = ""
    fast_accum: bool = False

    def __repr__(self) -> str:
        # The dataclass repr, less `scale` and `fast_accum` at their defaults: a GEMM class
        # renders (header included) exactly as it did before those fields existed, so its
        # kernel files and Triton's cache entries stay valid.
        shown = [f for f in dataclasses.fields(self)
                 if not (f.name in ("scale", "fast_accum") and getattr(self, f.name) == f.default)]
        return f"KernelClass({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"

    def key(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]


def pointer_args(kc: KernelClass) -> list[tuple[str, str]]:
    """(argument name, dtype name) of the kernel's pointer arguments, in signature order:
    A, B, C, then scaled_mm's SCALE_A and SCALE_B (float32), then the bias."""
    out = [("A", kc.dtype), ("B", kc.dtype), ("C", kc.out_dtype)]
    if kc.scale:
        out += [("SCALE_A", "float32"), ("SCALE_B", "float32")]
    if kc.bias:
        out.append(("BIAS", kc.dtype))
    return out


def scale_patterns(scale: str) -> dict[str, tuple[int, int]]:
    """Strides of scale_a and scale_b over the output's (m, n), as Inductor's epilogue
    indexes them (a size-1 dimension is dropped: stride 0): "tensor" -> (0, 0) and (0, 0)
    (Inductor unsqueezes the scalars to [1, 1]); "row" -> scale_a [M, 1] by row (1, 0),
    scale_b [1, N] by column (0, 1)."""
    if scale == "tensor":
        return {"SCALE_A": (0, 0), "SCALE_B": (0, 0)}
    if scale == "row":
        return {"SCALE_A": (1, 0), "SCALE_B": (0, 1)}
    raise ValueError(f"unknown scale '{scale}' (tensor, row)")


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def problem_strides(p) -> dict[str, tuple[int, ...]]:
    """Strides (in elements) of A, B, C and the bias exactly as problems.make_inputs lays them out."""
    from .problems import bias_shape
    batched = p.op in ("bmm", "baddbmm")
    if p.trans_a:   # stored (K, M), viewed (M, K)
        s = _strides((p.batch, p.k, p.m) if batched else (p.k, p.m))
        a = s[:-2] + (s[-1], s[-2])
    else:
        a = _strides((p.batch, p.m, p.k) if batched else (p.m, p.k))
    if p.trans_b:
        s = _strides((p.batch, p.n, p.k) if batched else (p.n, p.k))
        b = s[:-2] + (s[-1], s[-2])
    else:
        b = _strides((p.batch, p.k, p.n) if batched else (p.k, p.n))
    c = _strides((p.batch, p.m, p.n) if batched else (p.m, p.n))
    bias: tuple[int, ...] = ()
    if p.op in ("addmm", "baddbmm") and p.bias != "none":
        shape = bias_shape(p)
        full = _strides(shape)
        # Broadcast to the output's (batch,) m, n: missing or size-1 dimensions get stride 0.
        dims = (p.batch, p.m, p.n) if batched else (p.m, p.n)
        pad = (0,) * (len(dims) - len(shape)) + tuple(0 if sz == 1 and d != 1 else st
                                                      for sz, st, d in zip(shape, full, dims[-len(shape):]))
        bias = pad
    return {"a": a, "b": b, "c": c, "bias": bias}


def kernel_class(p, even_k: bool, lowered_op: str | None = None, static: bool = False,
                 fast_accum: bool = False) -> KernelClass:
    """The kernel class of problem `p`: shared by every problem differing only in sizes, or
    with `static`, this problem's own (sizes and strides as literals, as Inductor compiles it).
    `fast_accum`: the config's USE_FAST_ACCUM (scaled_mm; the GEMM ops have none)."""
    op = lowered_op or p.op
    scaled = op == "scaled_mm"
    if scaled:
        scale_patterns(p.scale)   # an unknown scale kind fails here, not in the renderer
    elif fast_accum:
        raise ValueError(f"USE_FAST_ACCUM is a scaled_mm switch; op {op} has none")
    size = _DTYPE_SIZE[p.dtype_a]
    st = problem_strides(p)
    with_bias = op in ("addmm", "baddbmm") and bool(st["bias"])
    numel = max(p.batch * p.m * p.k, p.batch * p.k * p.n, p.batch * p.m * p.n)

    def pattern(strides):
        return tuple(strides) if static else Operand(strides).pattern(size)
    return KernelClass(
        batched=op in ("bmm", "baddbmm"), dtype=p.dtype_a, out_dtype=p.dtype_out, even_k=bool(even_k),
        a=pattern(st["a"]), b=pattern(st["b"]), c=pattern(st["c"]),
        bias=pattern(st["bias"]) if with_bias else (),
        alpha_one=p.alpha == 1.0 or not with_bias, beta_one=p.beta == 1.0 or not with_bias,
        index_int64=numel > INT32_MAX,
        sizes=tuple(stride_align(v, size) for v in (p.m, p.n, p.k)),
        static=(p.batch, p.m, p.n, p.k) if static else (),
        scale=p.scale if scaled else "", fast_accum=bool(fast_accum) and scaled)


# ---------------------------------------------------------------------------------------------
# Rendering

class _Hooks:
    """Our implementations of the template hooks Inductor's TritonTemplateKernel provides."""

    def __init__(self, kc: KernelClass):
        self.kc = kc
        self.ndim = 3 if kc.batched else 2
        self.params: list[str] = []

    def _stride_names(self, name: str, pattern: tuple[int, ...]) -> list[str]:
        return [f"s{name.lower()}{i}" for i in range(len(pattern))]

    def def_kernel(self, *names: str) -> str:
        kc = self.kc
        args = [name for name, _ in pointer_args(kc)]
        if not kc.static:
            args += ["M_q", "N_q", "K_q"] + (["BATCH_"] if kc.batched else [])
        for nm, pat in (("A", kc.a), ("B", kc.b), ("C", kc.c), ("BIAS", kc.bias)):
            for i, v in enumerate(pat):
                if v < 0:
                    args.append(f"s{nm.lower()}{i}_q")
        if kc.bias and not kc.alpha_one:
            args.append("alpha")
        if kc.bias and not kc.beta_one:
            args.append("beta")
        self.params = list(args)
        runtime = args[len(pointer_args(kc)):]
        # EVEN_K is a Jinja switch in triton_mm but a Triton constexpr in triton_bmm: pass both.
        consts = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "EVEN_K", "ALLOW_TF32", "A_HINT", "B_HINT",
                  "SM", "SN", "SK"]
        for nm, pat in (("A", kc.a), ("B", kc.b), ("C", kc.c), ("BIAS", kc.bias)):
            for i, v in enumerate(pat):
                if v < 0:
                    consts.append(f"S{nm}{i}")
        sig = ", ".join(args + [f"{c}: tl.constexpr" for c in consts])
        dns = ", ".join(repr(a) for a in runtime)
        # As Inductor's def_kernel does: dtype constants as constexpr locals of the kernel.
        index = "tl.int64" if kc.index_int64 else "tl.int32"
        return (f"@triton.jit(do_not_specialize=[{dns}])\ndef kernel({sig}):\n"
                f"    ACC_TYPE: tl.constexpr = tl.float32\n    INDEX_DTYPE: tl.constexpr = {index}")

    def _norm(self, name: str, index: int) -> int:
        return index + self.ndim if index < 0 else index

    def size(self, name: str, index: int) -> str:
        i = self._norm(name, index)
        if self.kc.static:  # literals, as Inductor renders a static-shape problem
            batch, m, n, k = self.kc.static
            if self.kc.batched and i == 0:
                return str(batch)
            i -= 1 if self.kc.batched else 0
            return str({("A", 0): m, ("A", 1): k, ("B", 0): k, ("B", 1): n}[(name, i)])
        if self.kc.batched and i == 0:
            return "BATCH_"
        i -= 1 if self.kc.batched else 0
        # q * alignment: Triton's axis analysis then knows what Inductor's constants told it
        # (masks such as `offs_k < K - k0` constant over a whole vector, so loads stay wide).
        return {("A", 0): "(M_q * SM)", ("A", 1): "(K_q * SK)", ("B", 0): "(K_q * SK)",
                ("B", 1): "(N_q * SN)"}[(name, i)]

    def _stride_expr(self, name: str, i: int) -> str:
        pat = {"A": self.kc.a, "B": self.kc.b, "C": self.kc.c, "BIAS": self.kc.bias}[name]
        v = pat[i]
        if v >= 0:
            return str(v)
        return f"(s{name.lower()}{i}_q * S{name}{i})"

    def stride(self, name: str, index: int | None = None) -> str:
        return self._stride_expr(name, self._norm(name, index))

    def _index(self, name: str, idx: tuple[str, ...]) -> str:
        pat = {"A": self.kc.a, "B": self.kc.b, "C": self.kc.c, "BIAS": self.kc.bias}[name]
        off = len(pat) - len(idx)
        terms = []
        for j, var in enumerate(idx):
            e = self._stride_expr(name, j + off)
            if e == "0":
                continue
            terms.append(var if e == "1" else f"{var} * {e}")
        return " + ".join(terms) or "0"

    @staticmethod
    def _scale_index(pattern: tuple[int, int], idx: tuple[str, ...]) -> str:
        terms = [var for var, st in zip(idx, pattern) if st]   # the patterns hold 0 and 1 only
        return " + ".join(terms) or "0"

    def load_input(self, name, var, idx, mask=None, indent_width=4, index_shape=None, **_):
        m = f", mask={mask}, other=0.0" if mask else ""
        return f"{var} = tl.load({name} + ({self._index(name, tuple(idx))}){m})"

    def store_output(self, idx, val, mask=None, indent_width=4, val_shape=None, **_):
        kc = self.kc
        pad = " " * indent_width
        lines = []
        if kc.scale:
            # Inductor's scale_mm_epilogue: mul(acc, mul(scale_a, scale_b)), each scale loaded
            # by its epilogue codegen: a constant index as a scalar load broadcast to the tile,
            # otherwise a masked load at the scale's index.
            pats = scale_patterns(kc.scale)
            names = {"SCALE_A": "scale_a", "SCALE_B": "scale_b"}
            shape = ", ".join(val_shape or ("BLOCK_M", "BLOCK_N"))
            for ptr, var in names.items():
                sidx = self._scale_index(pats[ptr], tuple(idx))
                if sidx == "0":
                    lines.append(f"{var} = tl.broadcast_to(tl.load({ptr} + (0)), [{shape}])")
                else:   # the index broadcast to the tile, as Inductor's template epilogue writes it
                    lines.append(f"{var} = tl.load({ptr} + (tl.broadcast_to({sidx}, [{shape}])), {mask}, "
                                 "eviction_policy='evict_last')")
            lines.append(f"{val} = {val} * (scale_a * scale_b)")
        if kc.bias:
            bidx = self._index("BIAS", tuple(idx))
            lines.append(f"bias = tl.load(BIAS + ({bidx}), {mask}, eviction_policy='evict_last').to(tl.float32)")
            if not kc.alpha_one:
                lines.append(f"{val} = {val} * alpha")
            if not kc.beta_one:
                lines.append("bias = bias * beta")
            lines.append(f"{val} = {val} + bias")
        lines.append(f"tl.store(C + ({self._index('C', tuple(idx))}), {val}.to(C.dtype.element_ty), {mask})")
        return ("\n" + pad).join(lines)


# Inductor's templates choose the A/B row offsets with
#   if ((stride_am == 1 and stride_ak == M) or (stride_am == K and stride_ak == 1)) and (M >= BLOCK_M and K > 1):
# a condition its constants decide at compile time. With runtime sizes it would become a
# run-time branch and the contiguity facts of the fast side would be lost at the join, so
# the condition is replaced by a constexpr (A_HINT / B_HINT) that hints() evaluates exactly
# as the template's expression would with Inductor's constants.
_HINT_LINE = re.compile(r"^(\s*)if \(\(stride_(a|b)\w+ == 1 and stride_\w+ == \w\) or \(stride_\w+ == \w and "
                        r"stride_\w+ == 1\)\) and \(\w >= BLOCK_\w and K > 1\):\s*$", re.M)


def hints(p, params: dict) -> dict:
    """A_HINT, B_HINT: the template's contiguity conditions, with the problem's values."""
    st = problem_strides(p)
    off = 1 if p.op in ("bmm", "baddbmm") else 0
    sam, sak = st["a"][off], st["a"][off + 1]
    sbk, sbn = st["b"][off], st["b"][off + 1]
    m, n, k = p.m, p.n, p.k
    a = ((sam == 1 and sak == m) or (sam == k and sak == 1)) and (m >= params["BLOCK_M"] and k > 1)
    b = ((sbk == 1 and sbn == k) or (sbk == n and sbn == 1)) and (n >= params["BLOCK_N"] and k > 1)
    return {"A_HINT": bool(a), "B_HINT": bool(b)}


def render(kc: KernelClass) -> str:
    """Python source of one module holding `kernel`, rendered from Inductor's template."""
    import jinja2
    source = ic.gemm_template_source("bmm" if kc.batched else "mm")
    hooks = _Hooks(kc)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    body = env.from_string(source).render(
        def_kernel=hooks.def_kernel, size=hooks.size, stride=hooks.stride, load_input=hooks.load_input,
        store_output=hooks.store_output, EVEN_K=kc.even_k, USE_FAST_ACCUM=kc.fast_accum)
    body = _HINT_LINE.sub(lambda m: f"{m.group(1)}if {m.group(2).upper()}_HINT:", body)
    header = ("# Rendered by torch_diode.collect.template from Inductor's GEMM template;\n"
              f"# kernel class: {kc!r}\n"
              "import triton\nimport triton.language as tl\n\n")
    return header + body + "\n"


_LOADED: dict[KernelClass, object] = {}


def kernel_dir() -> str:
    d = os.environ.get("TORCH_DIODE_KERNEL_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "torch_diode", "kernels")
    os.makedirs(d, exist_ok=True)
    return d


def load(kc: KernelClass):
    """The @triton.jit kernel of a class (rendered to a file once: Triton reads its source)."""
    fn = _LOADED.get(kc)
    if fn is not None:
        return fn
    src = render(kc)
    digest = hashlib.sha256(src.encode()).hexdigest()[:20]
    path = os.path.join(kernel_dir(), f"diode_gemm_{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(src)
        os.replace(tmp, path)
    name = f"torch_diode_gemm_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    _LOADED[kc] = mod.kernel
    return mod.kernel


# ---------------------------------------------------------------------------------------------
# Launching

def launch_args(kc: KernelClass, p, tensors: dict, cfg: dict, allow_tf32: bool):
    """(grid, positional args, keyword constexprs) for one launch of `kernel`."""
    size = _DTYPE_SIZE[p.dtype_a]
    st = problem_strides(p)
    by_name = {"A": "a", "B": "b", "C": "c", "SCALE_A": "scale_a", "SCALE_B": "scale_b", "BIAS": "bias"}
    args = [tensors[by_name[name]] for name, _ in pointer_args(kc)]
    sm, sn, sk = kc.sizes
    if kc.static:
        if kc.static != (p.batch, p.m, p.n, p.k):
            raise ValueError(f"static kernel class for {kc.static} launched on {(p.batch, p.m, p.n, p.k)}")
    else:
        args += [p.m // sm, p.n // sn, p.k // sk] + ([p.batch] if kc.batched else [])
    consts = {"SM": sm, "SN": sn, "SK": sk, **hints(p, cfg)}
    for nm, pat, strides in (("A", kc.a, st["a"]), ("B", kc.b, st["b"]), ("C", kc.c, st["c"]),
                             ("BIAS", kc.bias, st["bias"])):
        for i, v in enumerate(pat):
            if v < 0:
                al = stride_align(strides[i], size)
                args.append(strides[i] // al)
                consts[f"S{nm}{i}"] = al
    if kc.bias and not kc.alpha_one:
        args.append(float(p.alpha))
    if kc.bias and not kc.beta_one:
        args.append(float(p.beta))
    consts.update(BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"],
                  GROUP_M=cfg.get("GROUP_M", 8), EVEN_K=kc.even_k, ALLOW_TF32=bool(allow_tf32),
                  num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    tiles = math.ceil(p.m / cfg["BLOCK_M"]) * math.ceil(p.n / cfg["BLOCK_N"])
    if kc.batched:  # Inductor's bmm grid: batches over grid y (and z past 65535)
        y = min(p.batch, 65535)
        grid = (tiles, y, math.ceil(p.batch / y))
    else:
        grid = (tiles, 1, 1)
    return grid, args, consts
