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

`_scaled_mm` (op "scaled_mm", the scaled_mm decision family) has inputs (mat_a, mat_b,
scale_a, scale_b[, bias]): float8_e4m3fn operands, float32 scales, and `scale` "tensor"
(both scales hold one element) or "row" (scale_a [M, 1], scale_b [1, N]); any other scale
shape, a bias, or another operand dtype is outside the family (Unsupported).
"""
from __future__ import annotations

import itertools
import operator
from typing import Any

from ..wire import DTYPES, OPS, KernelConfig, Problem
from .. import inductor_compat as ic
from . import compat

_TORCH_DTYPES = {"torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float32": "float32"}
_FP8_DTYPES = {"torch.float8_e4m3fn": "float8_e4m3fn"}
SCALED_MM = "scaled_mm"          # Inductor's op_name of the aten._scaled_mm lowering


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
    if op_name == SCALED_MM:
        return scaled_problem_from_inputs(kernel_inputs)
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


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def scale_kind(scale_a_shape: tuple, scale_b_shape: tuple, m: int, n: int) -> str:
    """The Problem.scale of _scaled_mm's scale operands: "tensor" when both hold one element,
    "row" for scale_a [M, 1] with scale_b [1, N]; raises Unsupported("unsupported_scale")
    for any other pair (block-wise, column-only, ...)."""
    sa, sb = tuple(int(d) for d in scale_a_shape), tuple(int(d) for d in scale_b_shape)
    if _numel(sa) == 1 and _numel(sb) == 1:
        return "tensor"
    if sa == (m, 1) and sb == (1, n):
        return "row"
    raise Unsupported("unsupported_scale")


def scaled_problem_from_inputs(kernel_inputs: Any) -> Problem:
    """The Problem of an `aten._scaled_mm` lowering's MMKernelInputs (inputs mat_a, mat_b,
    scale_a, scale_b[, bias]): op "scaled_mm", batch 1, float8_e4m3fn operands, the output
    dtype, the operands' layouts and the scale kind (scale_kind). Raises Unsupported for what
    the scaled_mm family does not cover: a bias ("scaled_mm_bias"), operands of another dtype
    ("unsupported_dtype"), scales that are not float32 ("unsupported_scale_dtype") or of
    another shape ("unsupported_scale")."""
    m, n, k = (int(x) for x in kernel_inputs.mnk_hinted())
    shapes = kernel_inputs.shapes_hinted()
    strides = kernel_inputs.strides_hinted()
    dtypes = kernel_inputs.dtypes()
    i1, i2 = ic.mm_operand_indices(kernel_inputs)
    if len(shapes) < 4:
        raise Unsupported("no_scale_inputs")
    if len(shapes) > 4:
        raise Unsupported("scaled_mm_bias")
    ia, ib = (j for j in range(4) if j not in (i1, i2))
    if str(dtypes[ia]) != "torch.float32" or str(dtypes[ib]) != "torch.float32":
        raise Unsupported("unsupported_scale_dtype")
    da, db = _FP8_DTYPES.get(str(dtypes[i1])), _FP8_DTYPES.get(str(dtypes[i2]))
    if da is None or db is None:
        raise Unsupported("unsupported_dtype")
    s1, s2 = tuple(int(s) for s in strides[i1]), tuple(int(s) for s in strides[i2])
    p = Problem(op=SCALED_MM, batch=1, m=m, n=n, k=k, dtype_a=da, dtype_b=db,
                dtype_out=dtype_name(kernel_inputs.out_dtype()), trans_a=_transposed(s1),
                trans_b=_transposed(s2), bias="none", alpha=1.0, beta=1.0,
                scale=scale_kind(shapes[ia], shapes[ib], m, n))
    if min(p.m, p.n, p.k) < 1:
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


def _key_from_kwargs(uid: str, kw: dict, extra: dict) -> tuple:
    """config_key_from_ktc() of a KTC of template `uid` with params `kw` and extra kwargs
    `extra` (KeyError where a block size is missing). The one definition both paths of
    config_keys_from_ktcs() use."""
    get = kw.get
    acc = get("ACC_TYPE")
    # no int(): Inductor's sizes are ints already, and any other integer type
    # (numpy, sympy Integer) compares and hashes equal to its int() and converts
    # to float for the features; flags go through bool() (a sympy boolean would not)
    return (uid, kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], get("GROUP_M", 8), kw["num_stages"],
            kw["num_warps"], bool(get("EVEN_K", False)),
            bool(extra.get("ALLOW_TF32", get("ALLOW_TF32", False))),
            bool(get("USE_FAST_ACCUM", False)), "" if acc is None else _acc_type(acc), ())


def _config_keys_slow(ktcs: list) -> list[tuple]:
    """config_keys_from_ktcs() through to_kwargs() (params other than Inductor's plain dict)."""
    out = []
    append = out.append
    uids: dict[int, str] = {}
    for ktc in ktcs:
        t = ktc.template
        uid = uids.get(id(t))
        if uid is None:
            uid = uids[id(t)] = compat.ktc_uid(ktc)
        p = getattr(ktc, "params", None)
        kw = p.to_kwargs() if p is not None and hasattr(p, "to_kwargs") else compat.ktc_kwargs(ktc)
        append(_key_from_kwargs(uid, kw, getattr(ktc, "extra_kwargs", None) or {}))
    return out


# (uid, extra kwargs' ALLOW_TF32 or None, kwargs names in order) -> {kwargs values: key}.
# Inductor offers the same few thousand configs for every GEMM but as new dicts each time;
# the values tuple (one C call: itemgetter) finds the key built before, so a known config
# costs no Python per field, and equal configs share one key object, which makes the
# ranker's table lookup an identity compare. Values compare and hash like the key fields
# they become (16 == 16.0 == np.int64(16); flags through bool()), so the cached key equals
# the key _key_from_kwargs() would build now.
_KEY_CACHE: dict[tuple, dict[tuple, tuple]] = {}
_KEY_CACHE_MAX = 1 << 16   # keys over all entries; cleared past this (a bound, never reached in practice)
_template_and_extra = operator.attrgetter("template", "extra_kwargs")
_template = operator.attrgetter("template")
_extra_kwargs = operator.attrgetter("extra_kwargs")
_params = operator.attrgetter("params")
_kwargs = operator.attrgetter("kwargs")


def _params_views(ktcs: list) -> list[dict] | None:
    """inductor_compat.ktc_params_views(ktcs) (the same contract: each KTC's own kwargs dict,
    None unless every params is exactly the probed DictKernelTemplateParams), reading each
    KTC's params once: three C loops over a list instead of attribute paths twice per KTC.
    Raises AttributeError for a KTC without params (value_runs: None)."""
    cls = ic._dict_params_class()
    if not cls:
        return None
    params = list(map(_params, ktcs))
    if list(map(type, params)).count(cls) != len(params):
        return None
    return list(map(_kwargs, params))


def _run_values(uid: str, extra: dict, kws: list[dict]) -> tuple[tuple, list[tuple]] | None:
    """(cache id, kwargs values per KTC) of a run of KTCs sharing one template and one
    extra_kwargs dict (what one make_ktc_generator call yields); None where the values do
    not determine the key (dicts with other key sets, unhashable values)."""
    names = tuple(kws[0])
    n = len(names)
    # itemgetter(*names) reads only these names: every dict must have exactly them (same
    # length + no KeyError = same key set); a single name would not give a tuple
    if n < 2 or list(map(len, kws)).count(n) != len(kws):
        return None
    # the only extra kwarg a key reads; present (even as None) it overrides the params'
    tf = bool(extra["ALLOW_TF32"]) if "ALLOW_TF32" in extra else None
    try:
        values = list(map(operator.itemgetter(*names), kws))
        hash(values[0])  # unhashable values would fail here, or in the lookups below
    except (KeyError, TypeError):
        return None
    return (uid, tf, names), values


def _keys_of_values(cid: tuple, values: list[tuple], uid: str, extra: dict, kws: list[dict]) -> list[tuple]:
    """Keys of a run given its _run_values(); the ones not in _KEY_CACHE are built."""
    cache = _KEY_CACHE.get(cid)
    try:
        keys = list(map(cache.get, values)) if cache is not None else [None]
    except TypeError:  # an unhashable value further down the run
        return [_key_from_kwargs(uid, kw, extra) for kw in kws]
    if None in keys:
        if sum(map(len, _KEY_CACHE.values())) > _KEY_CACHE_MAX:  # a few entries: cheap, misses only
            _KEY_CACHE.clear()
        cache = _KEY_CACHE.setdefault(cid, {})
        try:
            for v, kw in zip(values, kws):
                if v not in cache:
                    cache[v] = _key_from_kwargs(uid, kw, extra)
        except TypeError:
            return [_key_from_kwargs(uid, kw, extra) for kw in kws]
        keys = list(map(cache.__getitem__, values))
    return keys


class ValueRun:
    """A run of KTCs sharing one template and one extra_kwargs dict, as the kwargs values
    of each KTC: `cid` (uid, ALLOW_TF32 of the extra kwargs or None, kwargs names) and
    `values` determine every KTC's config key, which keys() builds (or finds)."""
    __slots__ = ("cid", "values", "_uid", "_extra", "_kws")

    def __init__(self, cid: tuple, values: list[tuple], uid: str, extra: dict, kws: list[dict]):
        self.cid, self.values, self._uid, self._extra, self._kws = cid, values, uid, extra, kws

    def keys(self) -> list[tuple]:
        """The run's config keys (raises Unsupported for a config without block sizes)."""
        try:
            return _keys_of_values(self.cid, self.values, self._uid, self._extra, self._kws)
        except KeyError as e:
            raise Unsupported("config_without_blocks") from e


def value_runs(ktcs: list) -> list[ValueRun] | None:
    """The KTCs as ValueRuns, in order, when every KTC's params is Inductor's plain dict
    params (inductor_compat.ktc_params_views) and each run's values determine its keys;
    else None (use config_keys_from_ktcs). Reading no field by name in Python is what
    makes this cheap: the hook reads ~1,400 KTCs per GEMM in the EXHAUSTIVE space."""
    try:
        kws = _params_views(ktcs) if ktcs else None
        if kws is None:
            return None
        templates = list(map(_template, ktcs))
        extras = list(map(_extra_kwargs, ktcs))
    except AttributeError:  # a KTC without extra_kwargs (old torch, test fakes)
        return None
    try:
        n = len(ktcs)
        # one template and one extra_kwargs dict (list.count: identity first, C loops; two
        # lists of shared objects cost less than a tuple per KTC)
        if templates.count(templates[0]) == n and extras.count(extras[0]) == n:
            bounds = [(0, n)]
        else:
            te = list(zip(templates, extras))
            bounds, start = [], 0
            for _, run in itertools.groupby(te):
                n = len(list(run))
                bounds.append((start, start + n))
                start += n
    except (TypeError, ValueError, RuntimeError):
        # two distinct extra_kwargs dicts of one template were compared by content, and a
        # value refused == (an array, a tensor): the per-KTC path reads them one by one
        return None
    out = []
    for a, b in bounds:
        uid, extra = compat.ktc_uid(ktcs[a]), extras[a] or {}
        part = kws if b - a == len(kws) else kws[a:b]
        rv = _run_values(uid, extra, part)
        if rv is None:
            return None
        out.append(ValueRun(rv[0], rv[1], uid, extra, part))
    return out


def config_keys_from_ktcs(ktcs: list) -> list[tuple]:
    """[config_key_from_ktc(k) for k in ktcs]: the hook's hot path (~1,400 KTCs per GEMM
    in the EXHAUSTIVE space, goal: the whole ranking in 2 ms, issue 19).

    Inductor's plain dict params are read without to_kwargs() copies
    (inductor_compat.ktc_params_views), and a config seen before is found by its values
    (_KEY_CACHE) rather than rebuilt field by field; other params go through to_kwargs()."""
    runs = value_runs(ktcs)
    if runs is None:
        try:
            return _config_keys_slow(ktcs)
        except KeyError as e:
            raise Unsupported("config_without_blocks") from e
    if len(runs) == 1:
        return runs[0].keys()
    return [k for r in runs for k in r.keys()]


def is_rankable(ktc: Any) -> bool:
    """Triton GEMM templates are ranked; ATen, decompose_k, CUTLASS, ... are always kept."""
    return compat.ktc_uid(ktc).startswith("triton::")


OWN_ATEN = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm")


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
    if problem.op == SCALED_MM:
        # cuBLASLt's _scaled_mm: template `aten`, its fast-accumulation flag (Inductor's
        # kwarg override `use_fast_accum`) as the config's use_fast_accum
        return KernelConfig(template="aten", use_fast_accum=bool(params.get("use_fast_accum",
                                                                            params.get("USE_FAST_ACCUM", False))))
    return to_config(compat.ktc_uid(ktc), params,
                     allow_tf32=problem.dtype_a == "float32" and compat.cublas_tf32_enabled())


def builds(ktc: Any) -> bool:
    """Whether a Triton KTC's ChoiceCaller builds (Inductor drops a KTC whose codegen fails,
    and builds it right after the finalize hook anyway, so asking now costs nothing extra).

    Where a choice cannot be built yet it counts as building: on torch 2.11 Inductor fixes
    the output layout only after the hook, and building before that raised "convert
    FlexibleLayout to FixedLayout first" (M = 1 mm and Q@K^T bmm, H100 run of 2026-11-25,
    which sent predict mode to its fallback); a failed build caches nothing on the KTC, so
    Inductor builds it afresh. Any other exception counts as not building (the next best is
    tried), as Inductor would hit it again. ATen and other extern choices always build and
    are not asked."""
    if not is_rankable(ktc):
        return True
    try:
        return getattr(ktc, "choice", True) is not None
    except AssertionError as e:  # not buildable *yet*: Inductor fixes the layout after the hook
        return NOT_YET_BUILDABLE in str(e)
    except Exception:  # noqa: BLE001 - any other build error: the next best choice is tried
        return False


NOT_YET_BUILDABLE = "FlexibleLayout to FixedLayout"  # torch 2.11 ir.py's assertion text


def other_config(ktc: Any, problem: Problem) -> KernelConfig:
    """A non-Triton choice as the collector records it: the op's ATen kernel as `aten`,
    others (aten::bias_addmm, decompose_k, ...) by uid and integer kwargs."""
    if is_own_aten(ktc):
        return aten_config(ktc, problem)
    from ..collect.records import to_config
    return to_config(compat.ktc_uid(ktc), {**compat.ktc_kwargs(ktc), **compat.ktc_extra_kwargs(ktc)})
