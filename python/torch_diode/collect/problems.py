"""wire.Problem -> the eager function torch.compile sees, and its input tensors."""
from __future__ import annotations

from .. import wire


def _dtype(name: str):
    import torch
    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[name]


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


def make_inputs(p: wire.Problem, device: str = "cuda", seed: int = 0) -> tuple:
    """Random inputs (scaled so fp16 sums stay finite); trans_* give column-major views."""
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
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
    raise ValueError(f"unknown op {p.op}")


def describe(p: wire.Problem) -> str:
    b = f"{p.batch}x" if p.op in ("bmm", "baddbmm") else ""
    t = ("T" if p.trans_a else "N") + ("T" if p.trans_b else "N")
    bias = f" bias={p.bias}" if p.bias != "none" else ""
    return f"{p.op} {b}{p.m}x{p.n}x{p.k} {p.dtype_a} {t}{bias}"
