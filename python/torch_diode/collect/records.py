"""Inductor choices -> wire records, and shard assembly.

Pure functions over plain dicts so they are testable without a GPU: the driver
hands us each choice's template uid and kwargs (from the KernelTemplateChoice).
"""
from __future__ import annotations

import math
import time

from .. import __version__, wire

# Template kwargs that map onto KernelConfig fields; any other integer kwarg goes to `extra`.
_FIELDS = {"BLOCK_M": "block_m", "BLOCK_N": "block_n", "BLOCK_K": "block_k", "GROUP_M": "group_m",
           "num_stages": "num_stages", "num_warps": "num_warps"}
# USE_FAST_ACCUM: the triton::mm switch of scaled_mm; use_fast_accum: the same flag as
# Inductor passes it to ATen's _scaled_mm (aten::_scaled_mm's kwargs).
_BOOLS = {"EVEN_K": "even_k", "ALLOW_TF32": "allow_tf32", "USE_FAST_ACCUM": "use_fast_accum",
          "use_fast_accum": "use_fast_accum"}
# Non-integer or per-problem kwargs that do not identify a kernel config.
_IGNORED = {"ACC_TYPE", "hint_override", "epilogue_fn", "prefix_args", "suffix_args",
            "layout", "input_nodes", "epilogue_fn_hash", "out_dtype"}
OWN_ATEN = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm"}


def acc_type_name(v) -> str:
    """'tl.float32' / torch.float32 / 'float32' -> 'float32'; unknown or None -> ''."""
    if v is None:
        return ""
    s = str(v).replace("tl.", "").replace("torch.", "")
    return {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(s, s if s in wire.DTYPES else "")


def to_config(template_uid: str, kwargs: dict, allow_tf32: bool = False) -> wire.KernelConfig:
    """A wire.KernelConfig from an Inductor template uid and its kwargs.

    The op's own ATen kernel (aten::mm, ...) is named `aten`, as the wire format
    specifies; other extern choices keep their uid (e.g. `aten::bias_addmm`).
    """
    template = "aten" if template_uid in OWN_ATEN else template_uid
    fields: dict = {"template": template, "allow_tf32": bool(allow_tf32)}
    extra = {}
    for key, val in kwargs.items():
        if key in _FIELDS:
            fields[_FIELDS[key]] = int(val)
        elif key in _BOOLS:
            fields[_BOOLS[key]] = bool(val)
        elif key == "ACC_TYPE":
            fields["acc_type"] = acc_type_name(val)
        elif key in _IGNORED or key.startswith("_"):
            continue
        elif isinstance(val, bool):
            extra[key] = int(val)
        elif isinstance(val, int):
            extra[key] = val
    if len(extra) > wire.MAX_EXTRA:
        extra = dict(sorted(extra.items())[: wire.MAX_EXTRA])
    fields["extra"] = tuple(sorted(extra.items(), key=lambda kv: kv[0].encode()))
    return wire.KernelConfig(**fields)


def classify_error(exc: BaseException | str | None) -> str:
    """Map a compile/benchmark failure to a wire status."""
    text = str(exc or "").lower()
    if isinstance(exc, TimeoutError) or "timed out" in text or "timeout" in text:
        return "timeout"
    if "out of resource" in text or "outofresources" in text or "shared memory" in text \
            or "too many resources" in text or "registers" in text:
        return "out_of_resources"
    return "compile_error"


def make_record(idx: int, cfg: wire.KernelConfig, status: str, median_ms: float = 0.0,
                iqr_ms: float = 0.0, repeats: int = 0) -> wire.ShardRecord:
    if status == "ok" and not (median_ms > 0 and math.isfinite(median_ms)):
        status, median_ms = "compile_error", 0.0
    if status != "ok":
        return wire.ShardRecord(idx, cfg, 0.0, 0.0, 0, status, 0)
    return wire.ShardRecord(idx, cfg, median_ms * 1000.0, max(iqr_ms, 0.0) * 1000.0, repeats, "ok", 0)


def dedupe(records: list[wire.ShardRecord]) -> list[wire.ShardRecord]:
    """One record per (problem, config): an `ok` timing wins over a failure, else first seen."""
    best: dict = {}
    for r in records:
        key = (r.problem_index, r.config)
        old = best.get(key)
        if old is None or (old.status != "ok" and r.status == "ok"):
            best[key] = r
    return list(best.values())


def compact(problems: list[wire.Problem], records: list[wire.ShardRecord]):
    """Keep only problems that have records (a shard written mid-run lists what it measured)."""
    used = sorted({r.problem_index for r in records})
    new = {old: i for i, old in enumerate(used)}
    return ([problems[i] for i in used],
            [wire.ShardRecord(new[r.problem_index], *[getattr(r, f) for f in
                                                      ("config", "median_us", "spread_us", "repeats", "status",
                                                       "flags")]) for r in records])


def compact_walls(records: list[wire.ShardRecord], walls: dict) -> list[float]:
    """Per problem kept by compact(), in its order, the seconds spent on it."""
    return [float(walls.get(i, 0.0)) for i in sorted({r.problem_index for r in records})]


def build_shard(spec_shard_id: str, sweep_id: str, hardware: wire.HardwareId, producer_name: str,
                producer_key: str, problems: list[wire.Problem], records: list[wire.ShardRecord],
                created_ms: int | None = None, problem_wall_s: list[float] | None = None,
                method: wire.CollectionMethod | None = None,
                templates: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A sealed, encoded shard. `method` says how it was timed and by which collector
    (wire v2), so data timed differently is never mixed silently; `problem_wall_s` gives
    the seconds spent on each problem (throughput can be computed from any shard);
    `templates` (inductor_compat.template_hashes) the Inductor template sources its Triton
    kernels were rendered from (wire v3: a shard with templates is written as version 3)."""
    shard = wire.Shard(spec_shard_id, sweep_id, hardware,
                       wire.Producer(producer_name, producer_key, "inductor", f"diode {__version__}"),
                       int(time.time() * 1000) if created_ms is None else created_ms,
                       list(problems), dedupe(records), method=method or wire.CollectionMethod("", ""),
                       problem_wall_s=tuple(problem_wall_s or ()), templates=tuple(sorted(templates)))
    data = wire.encode(wire.seal(shard))
    wire.decode_shard(data)  # never write a shard our own decoder (and so C++) would reject
    return data
