"""Inductor objects -> wire types (Problem, KernelConfig), the inputs of torch_diode.features.

The mapping follows docs/wire-format.md field by field:
* M, N, K and batch come from the hinted sizes of mat1/mat2 (`MMKernelInputs.mnk_hinted`,
  `batch_hinted`), so dynamic shapes are ranked at their hint;
* trans_a / trans_b: the operand is stored column-major (stride of its last dim != 1 and
  of its second-to-last == 1);
* bias (addmm/baddbmm, the first input node): stride 0 on the row dim = `row` (a vector of
  N broadcast over rows), stride 0 on the column dim = `column`, else `full`;
* template configs: `BLOCK_M/N/K, GROUP_M, num_stages, num_warps, EVEN_K, USE_FAST_ACCUM,
  ACC_TYPE` from the KTC params, `ALLOW_TF32` from its extra kwargs.
"""
from __future__ import annotations

from typing import Any

from ..wire import DTYPES, OPS, KernelConfig, Problem
from .. import inductor_compat as ic
from . import compat

_TORCH_DTYPES = {"torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float32": "float32"}


class Unsupported(Exception):
    """The op or its inputs are outside what the model covers; the message is the reason key."""


def dtype_name(dt: Any) -> str:
    name = _TORCH_DTYPES.get(str(dt))
    if name is None:
        raise Unsupported("unsupported_dtype")
    return name


def _transposed(strides: tuple[int, ...]) -> bool:
    return len(strides) >= 2 and strides[-1] != 1 and strides[-2] == 1


def problem_from_inputs(kernel_inputs: Any, op_name: str) -> Problem:
    if op_name not in OPS:
        raise Unsupported("unsupported_op")
    if not hasattr(kernel_inputs, "mnk_hinted"):
        raise Unsupported("not_mm_inputs")
    m, n, k = (int(x) for x in kernel_inputs.mnk_hinted())
    batch = int(kernel_inputs.batch_hinted()) if op_name in ("bmm", "baddbmm") else 1
    nodes_strides = kernel_inputs.strides_hinted()
    dtypes = kernel_inputs.dtypes()
    i1, i2 = ic.mm_operand_indices(kernel_inputs)
    s1, s2 = tuple(int(s) for s in nodes_strides[i1]), tuple(int(s) for s in nodes_strides[i2])
    bias = "none"
    if op_name in ("addmm", "baddbmm"):
        if len(nodes_strides) < 3:
            raise Unsupported("no_bias_input")
        bs = tuple(int(s) for s in nodes_strides[0])
        if len(bs) == 1 or (len(bs) >= 2 and bs[-2] == 0):
            bias = "row"
        elif len(bs) >= 2 and bs[-1] == 0:
            bias = "column"
        else:
            bias = "full"
    scalars = ic.mm_scalars(kernel_inputs)
    p = Problem(op=op_name, batch=batch, m=m, n=n, k=k,
                dtype_a=dtype_name(dtypes[i1]), dtype_b=dtype_name(dtypes[i2]),
                dtype_out=dtype_name(kernel_inputs.out_dtype()),
                trans_a=_transposed(s1), trans_b=_transposed(s2), bias=bias,
                alpha=float(scalars.get("alpha", 1.0)), beta=float(scalars.get("beta", 1.0)))
    if min(p.m, p.n, p.k, p.batch) < 1:
        raise Unsupported("degenerate_shape")
    return p


def _acc_type(v: Any) -> str:
    if v is None:
        return ""
    s = str(v)
    for prefix in ("tl.", "torch."):
        if s.startswith(prefix):
            s = s[len(prefix):]
    return s if s in DTYPES else ""


def config_from_ktc(ktc: Any) -> KernelConfig:
    """KernelConfig of a Triton template choice; raises on a config without block sizes."""
    kw = compat.ktc_kwargs(ktc)
    extra = compat.ktc_extra_kwargs(ktc)
    try:
        return KernelConfig(
            template=compat.ktc_uid(ktc),
            block_m=int(kw["BLOCK_M"]), block_n=int(kw["BLOCK_N"]), block_k=int(kw["BLOCK_K"]),
            group_m=int(kw.get("GROUP_M", 8)), num_stages=int(kw["num_stages"]),
            num_warps=int(kw["num_warps"]), even_k=bool(kw.get("EVEN_K", False)),
            allow_tf32=bool(extra.get("ALLOW_TF32", kw.get("ALLOW_TF32", False))),
            use_fast_accum=bool(kw.get("USE_FAST_ACCUM", False)),
            acc_type=_acc_type(kw.get("ACC_TYPE")),
        )
    except KeyError as e:
        raise Unsupported("config_without_blocks") from e


def config_key_from_ktc(ktc: Any) -> tuple:
    """ranking.config_key(config_from_ktc(ktc)) without building the KernelConfig (the
    frozen dataclass costs microseconds per config; the hook reads ~1,400 per GEMM in the
    EXHAUSTIVE space and builds KernelConfigs only for what it keeps)."""
    kw = compat.ktc_kwargs(ktc)
    extra = compat.ktc_extra_kwargs(ktc)
    try:
        return (compat.ktc_uid(ktc), int(kw["BLOCK_M"]), int(kw["BLOCK_N"]), int(kw["BLOCK_K"]),
                int(kw.get("GROUP_M", 8)), int(kw["num_stages"]), int(kw["num_warps"]),
                bool(kw.get("EVEN_K", False)), bool(extra.get("ALLOW_TF32", kw.get("ALLOW_TF32", False))),
                bool(kw.get("USE_FAST_ACCUM", False)), _acc_type(kw.get("ACC_TYPE")), ())
    except KeyError as e:
        raise Unsupported("config_without_blocks") from e


def config_keys_from_ktcs(ktcs: list) -> list[tuple]:
    """[config_key_from_ktc(k) for k in ktcs], in one loop with no per-KTC dict copies
    (the hook's hot path: ~1,400 KTCs per GEMM in the EXHAUSTIVE space)."""
    out = []
    append = out.append
    uids: dict[int, str] = {}
    try:
        for ktc in ktcs:
            t = ktc.template
            uid = uids.get(id(t))
            if uid is None:
                uid = uids[id(t)] = compat.ktc_uid(ktc)
            p = getattr(ktc, "params", None)
            kw = p.to_kwargs() if p is not None and hasattr(p, "to_kwargs") else compat.ktc_kwargs(ktc)
            extra = getattr(ktc, "extra_kwargs", None) or {}
            get = kw.get
            acc = get("ACC_TYPE")
            # no int(): Inductor's sizes are ints already, and any other integer type
            # (numpy, sympy Integer) compares and hashes equal to its int() and converts
            # to float for the features; flags go through bool() (a sympy boolean would not)
            append((uid, kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], get("GROUP_M", 8), kw["num_stages"],
                    kw["num_warps"], bool(get("EVEN_K", False)),
                    bool(extra.get("ALLOW_TF32", get("ALLOW_TF32", False))),
                    bool(get("USE_FAST_ACCUM", False)), "" if acc is None else _acc_type(acc), ()))
    except KeyError as e:
        raise Unsupported("config_without_blocks") from e
    return out


def is_rankable(ktc: Any) -> bool:
    """Triton GEMM templates are ranked; ATen, decompose_k, CUTLASS, ... are always kept."""
    return compat.ktc_uid(ktc).startswith("triton::")


OWN_ATEN = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def is_own_aten(ktc: Any) -> bool:
    """The op's own cuBLAS kernel (not aten::bias_addmm, decompose_k, ...)."""
    return compat.ktc_uid(ktc) in OWN_ATEN


def aten_config(ktc: Any, problem: Problem) -> KernelConfig:
    """The op's ATen choice as the collector records it (collect.records.to_config): template
    `aten`, TF32 as cuBLAS runs fp32 (the torch.backends switch), scalars in `extra`."""
    from ..collect.records import to_config
    params = {}
    try:
        params = {**compat.ktc_kwargs(ktc), **compat.ktc_extra_kwargs(ktc)}
    except compat.UnsupportedTorch:
        pass
    return to_config(compat.ktc_uid(ktc), params,
                     allow_tf32=problem.dtype_a == "float32" and compat.cublas_tf32_enabled())


def builds(ktc: Any) -> bool:
    """Whether the KTC's ChoiceCaller builds (Inductor drops a KTC whose codegen fails, and
    builds it right after the finalize hook anyway, so asking now costs nothing extra)."""
    return getattr(ktc, "choice", True) is not None


def other_config(ktc: Any, problem: Problem) -> KernelConfig:
    """A non-Triton choice as the collector records it: the op's ATen kernel as `aten`,
    others (aten::bias_addmm, decompose_k, ...) by uid and integer kwargs."""
    if is_own_aten(ktc):
        return aten_config(ktc, problem)
    from ..collect.records import to_config
    return to_config(compat.ktc_uid(ktc), {**compat.ktc_kwargs(ktc), **compat.ktc_extra_kwargs(ktc)})
