"""A problem's search space exactly as the running torch's Inductor offers it.

The problem is lowered by torch.compile with max-autotune; our finalize hook
(inductor_compat.make_choices_class) records every KernelTemplateChoice Inductor built
and hands back only one ATen choice, so Inductor compiles and benchmarks nothing else.
Done once with the EXHAUSTIVE space (the configs the collector times) and once with
DEFAULT (which of them Inductor's default max-autotune would try: the DEFAULT flag).

scaled_mm (FP8 `torch._scaled_mm`) is lowered by Inductor's tuned_scaled_mm with op_name
"scaled_mm": its choices are ATen's `aten::_scaled_mm` (cuBLASLt) and the `triton::mm`
template with the scale epilogue (the ones the collector renders and times). Any other
uid it offers (e.g. a persistent TMA scaled_mm template, which the DEFAULT space of an
H100/H200 does not offer) is recorded too, as not runnable by the collector.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from .. import inductor_compat as ic
from .. import wire
from . import records

GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm")
# op_names whose finalize call the collector records: the GEMM ops and scaled_mm.
AUTOTUNED_OPS = GEMM_OPS + ("scaled_mm",)
TRITON_GEMM = ("triton::mm", "triton::bmm")


@dataclass
class Offered:
    uid: str                    # Inductor template uid
    params: dict                # template kwargs (BLOCK_*, num_stages, num_warps, EVEN_K, ...)
    config: wire.KernelConfig   # as recorded
    default: bool = False       # also in Inductor's DEFAULT list


@dataclass
class Space:
    lowered_as: str                          # the op Inductor autotuned (baddbmm may lower as bmm)
    offered: list[Offered] = field(default_factory=list)
    lower_s: float = 0.0


def _lower(p: wire.Problem, search_space: str, tf32: bool) -> tuple[str, list]:
    import torch
    import torch._dynamo
    from torch._inductor import config

    from .driver import COMPILE_OPTIONS, inductor_settings_base
    from .problems import make_fn, make_inputs

    seen: dict = {}

    def on_finalize(ktcs, kernel_inputs, op_name):
        if op_name not in AUTOTUNED_OPS or "op" in seen:
            return ktcs
        seen["op"] = op_name
        out = []
        for ktc in ktcs:
            uid = ic.ktc_template_uid(ktc)
            out.append((uid, {**ic.ktc_params(ktc), **ic.ktc_extra(ktc)}))
        seen["list"] = out
        extern = [k for k in ktcs if not ic.ktc_template_uid(k).startswith("triton")]
        return extern[:1] or ktcs[:1]

    restore = ic.set_tf32(tf32)
    torch._dynamo.reset()
    inputs = make_inputs(p)
    try:
        with config.patch({**inductor_settings_base(search_space), "max_autotune_gemm_backends": "TRITON,ATEN"}), \
                ic.install_choices(ic.make_choices_class(on_finalize)):
            fn = torch.compile(make_fn(p), dynamic=False, fullgraph=True, options=COMPILE_OPTIONS)
            fn(*inputs)
    finally:
        restore()
        torch._dynamo.reset()
    if "op" not in seen:
        raise RuntimeError("Inductor did not autotune this problem as a GEMM (no finalize hook call: "
                           "a decomposition rewrote it, e.g. K == 1 as a pointwise product)")
    return seen["op"], seen["list"]


def _key(uid: str, params: dict) -> tuple:
    return (uid,) + tuple(sorted((k, v) for k, v in params.items()
                                 if isinstance(v, (int, bool)) and not k.startswith("_")))


def offered_space(p: wire.Problem, tf32: bool, search_space: str = "EXHAUSTIVE") -> Space:
    t0 = time.perf_counter()
    extern_tf32 = tf32 and p.dtype_a == "float32"
    op, full = _lower(p, search_space, tf32)
    default_keys = set()
    if search_space != "DEFAULT":
        _, dflt = _lower(p, "DEFAULT", tf32)
        default_keys = {_key(u, prm) for u, prm in dflt}
    sp = Space(lowered_as=op)
    seen = set()
    for uid, prm in full:
        cfg = records.to_config(uid, prm, allow_tf32=extern_tf32 if not uid.startswith("triton") else False)
        if cfg in seen:
            continue
        seen.add(cfg)
        sp.offered.append(Offered(uid, prm, cfg, default=search_space == "DEFAULT" or _key(uid, prm) in default_keys))
    sp.lower_s = time.perf_counter() - t0
    return sp
