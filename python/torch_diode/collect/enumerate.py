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
def _heuristic():
    base = ic.triton_heuristics_module().CUDAConfigHeuristic

    class DictConfigHeuristic(base):  # own singleton instance; Inductor's stays untouched
        def triton_config(self, num_stages, num_warps, **kwargs):
            return {"num_stages": num_stages, "num_warps": num_warps, **kwargs}

    return DictConfigHeuristic()


def mm_configs(m: int, n: int, k: int, dtype_size: int, search_space: str = "EXHAUSTIVE") -> list[dict]:
    """Template kwargs of every triton::mm config Inductor builds for an (m, n, k) GEMM."""
    from torch._inductor import config
    h = _heuristic()
    with config.patch(max_autotune_gemm_search_space=search_space), ic.size_hint_stub():
        gen = h.get_exhaustive_mm_configs() if search_space == "EXHAUSTIVE" else h.get_mm_configs()
        raw = list(gen(m, n, k, dtype_size=dtype_size, op_name="mm"))
    out = []
    for c in raw:
        c = {key: v for key, v in c.items() if key != "hint_override"}
        c.setdefault("GROUP_M", 8)
        c["EVEN_K"] = k % c["BLOCK_K"] == 0
        out.append(c)
    return out
