"""Inductor's own Triton GEMM config list for a shape, without compiling anything.

Runs the running torch's CUDAConfigHeuristic (EXHAUSTIVE or DEFAULT list, scaled to
the problem, register-spill pruned and de-duplicated exactly as Inductor does) on
concrete sizes. Works on a CPU-only torch too: only `triton_config` is overridden,
to return plain dicts instead of triton.Config objects. The driver does not depend
on this list (it records what Inductor's real lowering offers); it is used for
planning, for progress lines ("enumerated N") and in CPU tests.
"""
from __future__ import annotations

import functools

from .. import inductor_compat as ic


@functools.cache
def _heuristic(op: str = "mm"):
    """Inductor's CUDA config heuristic of `op`: CUDAConfigHeuristic for the GEMM ops, its
    scaled_mm subclass (the scaled_mm config list, BLOCK_K >= 32) for "scaled_mm"."""
    mod = ic.triton_heuristics_module()
    if op == "scaled_mm":
        base = getattr(mod, "CUDAScaledMMTemplateConfigHeuristic", None)
        if base is None:
            raise ic.UnsupportedTorch("this torch has no CUDAScaledMMTemplateConfigHeuristic (scaled_mm configs)")
    else:
        base = mod.CUDAConfigHeuristic

    class DictConfigHeuristic(base):  # own singleton instance; Inductor's stays untouched
        def triton_config(self, num_stages, num_warps, **kwargs):
            return {"num_stages": num_stages, "num_warps": num_warps, **kwargs}

    return DictConfigHeuristic()


def mm_configs(m: int, n: int, k: int, dtype_size: int, search_space: str = "EXHAUSTIVE",
               op: str = "mm") -> list[dict]:
    """Template kwargs of every triton::mm config Inductor builds for an (m, n, k) GEMM, or
    with op "scaled_mm" for an FP8 scaled_mm (dtype_size 1)."""
    from torch._inductor import config
    op = "scaled_mm" if op == "scaled_mm" else "mm"
    h = _heuristic(op)
    with config.patch(max_autotune_gemm_search_space=search_space), ic.size_hint_stub():
        gen = h.get_exhaustive_mm_configs() if search_space == "EXHAUSTIVE" else h.get_mm_configs()
        raw = list(gen(m, n, k, dtype_size=dtype_size, op_name=op))
    out = []
    for c in raw:
        c = {key: v for key, v in c.items() if key != "hint_override"}
        c.setdefault("GROUP_M", 8)
        c["EVEN_K"] = k % c["BLOCK_K"] == 0
        out.append(c)
    return out
