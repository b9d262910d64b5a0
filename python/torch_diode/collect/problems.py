"""wire.Problem -> the eager function torch.compile sees, and its input tensors."""
from __future__ import annotations

from .. import wire


def _dtype(name: str):
    import torch
    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
            "float8_e4m3fn": torch.float8_e4m3fn}[name]


# scaled_mm's operands are drawn as randn * FP8_SCALE before the cast to float8_e4m3fn:
# |x| < 1.5 nearly always, far inside e4m3's range (448), and a K = 14336 dot product of
# such values stays far inside bfloat16's.
FP8_SCALE = 0.25


def bias_shape(p: wire.Problem) -> tuple[int, ...]:
    if p.bias == "row":
        return (p.n,)
    if p.bias == "column":
        return (p.m, 1)
    if p.bias == "full":
        return (p.batch, p.m, p.n) if p.op == "baddbmm" else (p.m, p.n)
    raise ValueError(f"op {p.op} with bias '{p.bias}' has no bias tensor")


def operand_shapes(p: wire.Problem) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Storage shapes of A and B (transposed operands are stored the other way round)."""
    a = (p.k, p.m) if p.trans_a else (p.m, p.k)
    b = (p.n, p.k) if p.trans_b else (p.k, p.n)
    if p.op in ("bmm", "baddbmm"):
        return (p.batch, *a), (p.batch, *b)
    return a, b


def scale_shapes(p: wire.Problem) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shapes of scaled_mm's scale_a and scale_b: () and () for scale "tensor" (float32
    scalars), (M, 1) and (1, N) for "row"."""
    if p.op != "scaled_mm":
        raise ValueError(f"op {p.op} has no scales")
    if p.scale == "tensor":
        return (), ()
    if p.scale == "row":
        return (p.m, 1), (1, p.n)
    raise ValueError(f"scaled_mm with scale '{p.scale}' (tensor, row)")


def _scaled_inputs(p: wire.Problem, device: str, g) -> tuple:
    import torch
    fp8 = _dtype(p.dtype_a)
    a = (torch.randn((p.m, p.k), generator=g, device=device) * FP8_SCALE).to(fp8)
    w = (torch.randn((p.n, p.k), generator=g, device=device) * FP8_SCALE).to(fp8)
    b = w.t()   # [K, N] column-major, as cuBLASLt requires
    sa, sb = scale_shapes(p)
    # Scales in [0.5, 1.5): the epilogue's products differ per row / column for "row".
    scale_a = torch.rand(sa, generator=g, device=device, dtype=torch.float32) + 0.5
    scale_b = torch.rand(sb, generator=g, device=device, dtype=torch.float32) + 0.5
    return a, b, scale_a, scale_b


def make_inputs(p: wire.Problem, device: str = "cuda", seed: int = 0) -> tuple:
    """Random inputs (scaled so fp16 sums stay finite); trans_* give column-major views.
    scaled_mm: (a, b, scale_a, scale_b), a float8 [M, K] row-major, b float8 [K, N]
    column-major, the scales float32 (scale_shapes)."""
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
    if p.op == "scaled_mm":
        return _scaled_inputs(p, device, g)
    dt = _dtype(p.dtype_a)
    sa, sb = operand_shapes(p)
    a = torch.randn(sa, generator=g, device=device, dtype=dt) * 0.1
    b = torch.randn(sb, generator=g, device=device, dtype=dt) * 0.1
    if p.trans_a:
        a = a.transpose(-1, -2)
    if p.trans_b:
        b = b.transpose(-1, -2)
    if p.op in ("addmm", "baddbmm"):
        bias = torch.randn(bias_shape(p), generator=g, device=device, dtype=dt)
        return bias, a, b
    return a, b


def make_fn(p: wire.Problem):
    import torch
    alpha, beta = p.alpha, p.beta
    if p.op == "mm":
        return lambda a, b: torch.mm(a, b)
    if p.op == "bmm":
        return lambda a, b: torch.bmm(a, b)
    if p.op == "addmm":
        if alpha == 1.0 and beta == 1.0:  # keep the graph identical to what models produce
            return lambda c, a, b: torch.addmm(c, a, b)
        return lambda c, a, b: torch.addmm(c, a, b, beta=beta, alpha=alpha)
    if p.op == "baddbmm":
        if alpha == 1.0 and beta == 1.0:
            return lambda c, a, b: torch.baddbmm(c, a, b)
        return lambda c, a, b: torch.baddbmm(c, a, b, beta=beta, alpha=alpha)
    if p.op == "scaled_mm":
        out = _dtype(p.dtype_out)
        return lambda a, b, scale_a, scale_b: torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b,
                                                                 out_dtype=out, use_fast_accum=False)
    raise ValueError(f"unknown op {p.op}")


def describe(p: wire.Problem) -> str:
    b = f"{p.batch}x" if p.op in ("bmm", "baddbmm") else ""
    t = ("T" if p.trans_a else "N") + ("T" if p.trans_b else "N")
    bias = f" bias={p.bias}" if p.bias != "none" else ""
    scale = f" scale={p.scale}" if p.op == "scaled_mm" else ""
    return f"{p.op} {b}{p.m}x{p.n}x{p.k} {p.dtype_a} {t}{bias}{scale}"
