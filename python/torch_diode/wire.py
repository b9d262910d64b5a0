"""The diode wire format, version 3 (docs/wire-format.md), in Python.

Decoders read versions 1 to 3. Version 2 adds the shard's `method` and
`problem_wall_s`; version 3 adds `Problem.scale` (a 14th problem field) and
`Shard.templates`. Encoders write version 2 whenever nothing needs version 3
(every problem a GEMM op with scale "none", no templates), so those bytes are
exactly the version 2 ones, and version 3 otherwise. A decoded shard keeps its
version in `Shard.wire_version`, so re-encoding a version 1 shard reproduces
its bytes and its hash.

Encoding is canonical and byte-identical to the C++ encoder in
shared/src/wire.cpp; tests/python/test_wire_golden.py checks that against the
golden files written by C++. Decoding is strict: any malformed input raises
WireError naming the offending field.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import msgpack

VERSION = 2  # written by the encoders when nothing needs version 3
MAX_VERSION = 3  # the newest version: the decoders read MIN_VERSION..MAX_VERSION
MIN_VERSION = 1  # the oldest version the decoders read
INT64_MAX = (1 << 63) - 1
MAX_MESSAGE_BYTES = 256 << 20
MAX_STRING = 256
MAX_PROBLEMS = 65536
MAX_RECORDS = 4_000_000
MAX_EXTRA = 16
MAX_DIM = 1 << 31
MAX_TEMPLATES = 64  # Shard.templates entries
MAX_TEMPLATE_NAME = 128  # bytes

OPS = ("mm", "addmm", "bmm", "baddbmm", "scaled_mm")
DTYPES = ("float16", "bfloat16", "float32", "float8_e4m3fn")
SCALES = ("none", "tensor", "row")
# Decision families (shared/schema/contracts.json "families"): family -> its ops.
FAMILIES: dict[str, tuple[str, ...]] = {"gemm": ("mm", "addmm", "bmm", "baddbmm"),
                                        "scaled_mm": ("scaled_mm",)}
GEMM_DTYPES = ("float16", "bfloat16", "float32")  # operand and output dtypes of the gemm family
SCALED_MM_OUT_DTYPES = ("bfloat16", "float16", "float32")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
BIASES = ("none", "row", "column", "full")
STATUSES = ("ok", "compile_error", "out_of_resources", "timeout")
RUNNERS = ("inductor", "replay", "community")
# Record flag bits (TimingRecord.flags / ShardRecord.flags), defined once for Python
# (shared/schema/contracts.json "record_flags"; C++: kRecord* in diode/types.h).
FLAG_REPLAYED = 1 << 0      # produced by the replay runner, not measured
FLAG_DEFAULT = 1 << 1       # the config is in Inductor's DEFAULT list for this problem
FLAG_NOT_RUNNABLE = 1 << 2  # offered, but a template the collector cannot run (status compile_error)
FLAG_STATIC = 1 << 3        # timed as the problem's static-shape kernel (sizes as literals)
_SHARD_ID = re.compile(r"^[A-Za-z0-9._:/-]{1,128}$")


def family_of(op: str) -> str:
    """The decision family of an op ("gemm", "scaled_mm"); "" for an unknown op."""
    for family, ops in FAMILIES.items():
        if op in ops:
            return family
    return ""


class WireError(ValueError):
    """Malformed or out-of-bounds input; the message starts with the field path."""


@dataclass(frozen=True)
class HardwareId:
    vendor: str
    device_name: str
    arch: str = ""
    compute_capability: str = ""
    sm_count: int = 0
    memory_bytes: int = 0
    driver_version: str = ""
    runtime_version: str = ""
    torch_version: str = ""
    triton_version: str = ""


@dataclass(frozen=True)
class Problem:
    op: str = "mm"
    batch: int = 1
    m: int = 1
    n: int = 1
    k: int = 1
    dtype_a: str = "float16"
    dtype_b: str = "float16"
    dtype_out: str = "float16"
    trans_a: bool = False
    trans_b: bool = False
    bias: str = "none"
    alpha: float = 1.0
    beta: float = 1.0
    scale: str = "none"  # wire version 3: none (GEMM ops), tensor or row (scaled_mm)

    @property
    def needs_v3(self) -> bool:
        """Whether the problem can only be written in wire version 3."""
        return self.scale != "none" or family_of(self.op) != "gemm"


@dataclass(frozen=True)
class KernelConfig:
    template: str = "triton::mm"
    block_m: int = 0
    block_n: int = 0
    block_k: int = 0
    group_m: int = 0
    num_stages: int = 0
    num_warps: int = 0
    even_k: bool = False
    allow_tf32: bool = False
    use_fast_accum: bool = False
    acc_type: str = ""
    extra: tuple[tuple[str, int], ...] = ()  # sorted (key, value) pairs, hashable

    @property
    def is_triton(self) -> bool:
        return self.template.startswith("triton::")


@dataclass(frozen=True)
class TimingRecord:
    problem: Problem
    config: KernelConfig
    median_us: float = 0.0
    spread_us: float = 0.0
    repeats: int = 0
    status: str = "ok"
    flags: int = 0


@dataclass(frozen=True)
class Producer:
    name: str
    public_key: str = ""
    runner: str = "inductor"
    software_version: str = ""


@dataclass(frozen=True)
class ShardRecord:
    problem_index: int
    config: KernelConfig
    median_us: float = 0.0
    spread_us: float = 0.0
    repeats: int = 0
    status: str = "ok"
    flags: int = 0


@dataclass(frozen=True)
class CollectionMethod:
    """How a shard's timings were taken (wire version 2); empty in version 1 shards."""
    timing: str = ""  # e.g. "cuda-events+gpu-spin+cold-l2"
    collector: str = ""  # e.g. "torch_diode.collect 2.0.0"


@dataclass
class Shard:
    id: str
    sweep_id: str
    hardware: HardwareId
    producer: Producer
    created_ms: int
    problems: list[Problem] = field(default_factory=list)
    records: list[ShardRecord] = field(default_factory=list)
    sha256: bytes = b""
    method: CollectionMethod = field(default_factory=CollectionMethod)  # wire version 2 only
    # Wire version 2 only: empty, or the collector's wall seconds for each problem.
    problem_wall_s: tuple[float, ...] = ()
    # The version the shard is encoded and hashed in; decoding keeps the sender's.
    # A version 2 shard that holds something of version 3 is written (and sealed) as version 3.
    wire_version: int = VERSION
    # Wire version 3 only: sorted (template name, sha256 hex of the Inductor template source).
    templates: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        self.problem_wall_s = tuple(float(w) for w in self.problem_wall_s)  # a list compares unequal
        self.templates = tuple((str(n), str(h)) for n, h in self.templates)
        if self.wire_version == 2 and self.needs_v3:
            self.wire_version = 3

    @property
    def needs_v3(self) -> bool:
        return bool(self.templates) or any(p.needs_v3 for p in self.problems)

    def expanded_records(self) -> list[TimingRecord]:
        return [TimingRecord(self.problems[r.problem_index], r.config, r.median_us, r.spread_us,
                             r.repeats, r.status, r.flags) for r in self.records]

    def records_by_problem(self) -> list[tuple[Problem, list[ShardRecord]]]:
        """Each problem with its records (every status, in record order), in problem order;
        a problem without records gets an empty list. The one grouping the readers of a
        dataset share (the bench scripts), instead of each building its own index."""
        grouped: list[list[ShardRecord]] = [[] for _ in self.problems]
        for r in self.records:
            grouped[r.problem_index].append(r)
        return list(zip(self.problems, grouped))


# ------------------------------------------------------------------ encoding

def _hw(h: HardwareId) -> list:
    return [h.vendor, h.device_name, h.arch, h.compute_capability, int(h.sm_count),
            int(h.memory_bytes), h.driver_version, h.runtime_version, h.torch_version,
            h.triton_version]


def _problem(p: Problem, version: int = VERSION) -> list:
    f = [p.op, int(p.batch), int(p.m), int(p.n), int(p.k), p.dtype_a, p.dtype_b, p.dtype_out,
         bool(p.trans_a), bool(p.trans_b), p.bias, float(p.alpha), float(p.beta)]
    return f + [p.scale] if version >= 3 else f


def _problem_version(p: Problem) -> int:
    return 3 if p.needs_v3 else VERSION


def _config(c: KernelConfig) -> list:
    return [c.template, int(c.block_m), int(c.block_n), int(c.block_k), int(c.group_m),
            int(c.num_stages), int(c.num_warps), bool(c.even_k), bool(c.allow_tf32),
            bool(c.use_fast_accum), c.acc_type,
            {k: int(v) for k, v in sorted(c.extra, key=lambda kv: kv[0].encode())}]


def _timing(median: float, spread: float, repeats: int, status: str, flags: int) -> list:
    return [float(median), float(spread), int(repeats), status, int(flags)]


def _producer(p: Producer) -> list:
    return [p.name, p.public_key, p.runner, p.software_version]


def _check_template(templates: Any, i: int, path: str) -> None:
    """Entry i of a shard's templates (0..i-1 already checked), as C++ validate_template."""
    name, digest = templates[i]
    _str(name, f"{path}[{i}].name", MAX_TEMPLATE_NAME)
    _str(digest, f"{path}[{i}].sha256")
    if not name:
        _fail(f"{path}[{i}].name", "empty")
    if not _SHA256_HEX.fullmatch(digest):  # (match would let a trailing "\n" through)
        _fail(f"{path}[{i}].sha256", "expected 64 lower-case hex digits")
    if i and templates[i - 1][0] == name:
        _fail(f"{path}[{i}]", f"duplicate name '{name}'")
    if i and not templates[i - 1][0].encode() < name.encode():
        _fail(f"{path}[{i}]", "names not in sorted order")


def check_templates(templates: Any, path: str = "shard.templates") -> tuple[tuple[str, str], ...]:
    """Shard.templates: at most MAX_TEMPLATES (name, sha256 hex) pairs, names 1..128 bytes,
    unique and sorted by byte value, each hash 64 lower-case hex digits."""
    if len(templates) > MAX_TEMPLATES:
        _fail(path, f"more than {MAX_TEMPLATES} entries")
    for i in range(len(templates)):
        _check_template(templates, i, path)
    return tuple(templates)


def write_version(s: Shard) -> int:
    """The version a shard is encoded and hashed in: its wire_version, except that a
    version 2 shard holding a version 3 field (a non-GEMM problem, a scale, templates)
    is written as version 3."""
    if s.wire_version == 2 and s.needs_v3:
        return 3
    return s.wire_version


def _shard_content(s: Shard) -> list:
    """The fields the content hash covers: 0..6 in wire version 1, 0..8 in version 2,
    0..9 in version 3."""
    version = write_version(s)
    if not MIN_VERSION <= version <= MAX_VERSION:
        _fail("shard.wire_version", f"unsupported wire version {s.wire_version}")
    content = [s.id, s.sweep_id, _hw(s.hardware), _producer(s.producer), int(s.created_ms),
               [_problem(p, version) for p in s.problems],
               [[r.problem_index, _config(r.config), *_timing(r.median_us, r.spread_us, r.repeats,
                                                            r.status, r.flags)] for r in s.records]]
    if version == 1:
        if s.method.timing or s.method.collector:
            _fail("shard.method", "cannot be written in wire version 1 (set wire_version to 2)")
        if s.problem_wall_s:
            _fail("shard.problem_wall_s", "cannot be written in wire version 1 (set wire_version to 2)")
    if version < 3:
        if s.templates:
            _fail("shard.templates", f"cannot be written in wire version {version} (set wire_version to 3)")
        for i, p in enumerate(s.problems):
            if p.needs_v3:
                _fail(f"shard.problems[{i}]",
                      f"op {p.op} with scale {p.scale} cannot be written in wire version {version} "
                      "(set wire_version to 3)")
    if version == 1:
        return content
    content += [[s.method.timing, s.method.collector], [float(w) for w in s.problem_wall_s]]
    if version == 2:
        return content
    return content + [[[n, h] for n, h in check_templates(s.templates)]]


def _pack(obj: Any) -> bytes:
    # msgpack-python writes every float as float64 and every int in its shortest
    # form, as the canonical rules require; use_bin_type keeps str and bin apart.
    return msgpack.packb(obj, use_bin_type=True, use_single_float=False)


def _envelope(kind: str, body: list, version: int = VERSION) -> bytes:
    return _pack(["diode", version, kind, body])


def content_hash(s: Shard) -> bytes:
    return hashlib.sha256(_pack(_shard_content(s))).digest()


def seal(s: Shard) -> Shard:
    s.sha256 = content_hash(s)
    s.wire_version = write_version(s)
    return s


def encode(value: HardwareId | Problem | KernelConfig | TimingRecord | Shard) -> bytes:
    if isinstance(value, HardwareId):
        return _envelope("hardware", _hw(value))
    if isinstance(value, Problem):
        v = _problem_version(value)
        return _envelope("problem", _problem(value, v), v)
    if isinstance(value, KernelConfig):
        return _envelope("config", _config(value))
    if isinstance(value, TimingRecord):
        v = _problem_version(value.problem)
        return _envelope("record", [_problem(value.problem, v), _config(value.config),
                                    *_timing(value.median_us, value.spread_us, value.repeats,
                                             value.status, value.flags)], v)
    if isinstance(value, Shard):
        return _envelope("shard", _shard_content(value) + [bytes(value.sha256)], write_version(value))
    raise TypeError(f"cannot encode {type(value).__name__}")


# ------------------------------------------------------------------ decoding

def _fail(path: str, what: str) -> None:
    raise WireError(f"{path}: {what}")


class _Pairs(list):
    """A msgpack map as its (key, value) pairs in wire order, so that duplicate
    keys stay visible to the checks (a dict would silently keep the last)."""


def _type_name(v: Any) -> str:
    if isinstance(v, _Pairs):
        return "map"
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "uint" if v >= 0 else "negative int"
    return {float: "float", str: "str", bytes: "bin", list: "array", dict: "map"}.get(type(v), type(v).__name__)


def _array(v: Any, n: int, path: str) -> list:
    if not isinstance(v, list):
        _fail(path, f"expected array, got {_type_name(v)}")
    if len(v) != n:
        _fail(path, f"expected array of {n}, got {len(v)}")
    return v


def _str(v: Any, path: str, max_len: int = MAX_STRING) -> str:
    if not isinstance(v, str):
        _fail(path, f"expected str, got {_type_name(v)}")
    if len(v.encode()) > max_len:
        _fail(path, f"string longer than {max_len} bytes")
    return v


def _uint(v: Any, path: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        _fail(path, f"expected uint, got {_type_name(v)}")
    if v < lo or v > hi:
        _fail(path, f"{v} out of range [{lo}, {hi}]")
    return v


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        _fail(path, f"expected bool, got {_type_name(v)}")
    return v


def _float(v: Any, path: str) -> float:
    if not isinstance(v, float):
        _fail(path, f"expected float, got {_type_name(v)}")
    if not math.isfinite(v):
        _fail(path, "not a finite number")
    return v


def validate_problem(p: Problem, path: str = "problem") -> Problem:
    """The problem rules, with the C++ validate_problem's messages, in its order."""
    if p.op not in OPS:
        _fail(f"{path}.op", f"unknown op '{p.op}' (mm, addmm, bmm, baddbmm, scaled_mm)")
    for name in ("dtype_a", "dtype_b", "dtype_out"):
        if getattr(p, name) not in DTYPES:
            _fail(f"{path}.{name}",
                  f"unknown dtype '{getattr(p, name)}' (float16, bfloat16, float32, float8_e4m3fn)")
    if p.bias not in BIASES:
        _fail(f"{path}.bias", f"unknown bias '{p.bias}' (none, row, column, full)")
    if p.scale not in SCALES:
        _fail(f"{path}.scale", f"unknown scale '{p.scale}' (none, tensor, row)")
    has_bias = p.op in ("addmm", "baddbmm")
    if not has_bias and p.bias != "none":
        _fail(f"{path}.bias", f"op {p.op} takes no bias")
    if has_bias and p.bias == "none":
        _fail(f"{path}.bias", f"op {p.op} needs a bias layout")
    if p.op in ("mm", "addmm", "scaled_mm") and p.batch != 1:
        _fail(f"{path}.batch", f"op {p.op} needs batch 1")
    if p.op == "scaled_mm":
        for name in ("dtype_a", "dtype_b"):
            if getattr(p, name) != "float8_e4m3fn":
                _fail(f"{path}.{name}", "op scaled_mm needs float8_e4m3fn operands")
        if p.dtype_out not in SCALED_MM_OUT_DTYPES:
            _fail(f"{path}.dtype_out", "op scaled_mm writes bfloat16, float16 or float32")
        if p.scale == "none":
            _fail(f"{path}.scale", "op scaled_mm needs scale tensor or row")
    else:
        for name in ("dtype_a", "dtype_b", "dtype_out"):
            if getattr(p, name) not in GEMM_DTYPES:
                _fail(f"{path}.{name}", f"op {p.op} takes float16, bfloat16 or float32")
        if p.scale != "none":
            _fail(f"{path}.scale", f"op {p.op} takes scale none")
    return p


def _read_hw(v: Any, path: str) -> HardwareId:
    f = _array(v, 10, path)
    h = HardwareId(_str(f[0], f"{path}.vendor"), _str(f[1], f"{path}.device_name"),
                   _str(f[2], f"{path}.arch"), _str(f[3], f"{path}.compute_capability"),
                   _uint(f[4], f"{path}.sm_count", 0, 1 << 20),
                   _uint(f[5], f"{path}.memory_bytes", 0, (1 << 64) - 1),
                   _str(f[6], f"{path}.driver_version"), _str(f[7], f"{path}.runtime_version"),
                   _str(f[8], f"{path}.torch_version"), _str(f[9], f"{path}.triton_version"))
    if not h.vendor:
        _fail(f"{path}.vendor", "empty")
    if not h.device_name:
        _fail(f"{path}.device_name", "empty")
    return h


def _read_problem(v: Any, path: str, version: int = VERSION) -> Problem:
    f = _array(v, 14 if version >= 3 else 13, path)
    p = Problem(_str(f[0], f"{path}.op"), _uint(f[1], f"{path}.batch", 1, 1 << 20),
                _uint(f[2], f"{path}.m", 1, MAX_DIM), _uint(f[3], f"{path}.n", 1, MAX_DIM),
                _uint(f[4], f"{path}.k", 1, MAX_DIM), _str(f[5], f"{path}.dtype_a"),
                _str(f[6], f"{path}.dtype_b"), _str(f[7], f"{path}.dtype_out"),
                _bool(f[8], f"{path}.trans_a"), _bool(f[9], f"{path}.trans_b"),
                _str(f[10], f"{path}.bias"), _float(f[11], f"{path}.alpha"),
                _float(f[12], f"{path}.beta"),
                _str(f[13], f"{path}.scale", 32) if version >= 3 else "none")
    return validate_problem(p, path)


def _read_config(v: Any, path: str) -> KernelConfig:
    f = _array(v, 12, path)
    extra = f[11]
    if not isinstance(extra, _Pairs):
        _fail(f"{path}.extra", f"expected map, got {_type_name(extra)}")
    if len(extra) > MAX_EXTRA:
        _fail(f"{path}.extra", f"more than {MAX_EXTRA} entries")
    # The C++ decoder's checks, in its order: key, value, duplicate, order.
    seen: set[str] = set()
    for i, (key, val) in enumerate(extra):
        _str(key, f"{path}.extra[{i}]", 64)
        if isinstance(val, bool) or not isinstance(val, int):
            _fail(f"{path}.extra[{i}]", f"expected int value, got {_type_name(val)}")
        if val > INT64_MAX:
            _fail(f"{path}.extra[{i}]", "value out of int64 range")
        if key in seen:
            _fail(f"{path}.extra[{i}]", f"duplicate key '{key}'")
        if i and not extra[i - 1][0].encode() < key.encode():
            _fail(f"{path}.extra[{i}]", "keys not in sorted order")
        seen.add(key)
    c = KernelConfig(_str(f[0], f"{path}.template"), _uint(f[1], f"{path}.block_m", 0, 1024),
                     _uint(f[2], f"{path}.block_n", 0, 1024), _uint(f[3], f"{path}.block_k", 0, 1024),
                     _uint(f[4], f"{path}.group_m", 0, 256), _uint(f[5], f"{path}.num_stages", 0, 16),
                     _uint(f[6], f"{path}.num_warps", 0, 64), _bool(f[7], f"{path}.even_k"),
                     _bool(f[8], f"{path}.allow_tf32"), _bool(f[9], f"{path}.use_fast_accum"),
                     _str(f[10], f"{path}.acc_type"), tuple(extra))
    if not c.template:
        _fail(f"{path}.template", "empty")
    if c.is_triton and (not c.block_m or not c.block_n or not c.block_k or not c.num_warps):
        _fail(path, "Triton config needs non-zero block sizes and num_warps")
    if c.acc_type and c.acc_type not in DTYPES:
        _fail(f"{path}.acc_type", f"unknown dtype '{c.acc_type}'")
    return c


def _read_timing(f: list, path: str) -> tuple:
    median = _float(f[0], f"{path}.median_us")
    spread = _float(f[1], f"{path}.spread_us")
    repeats = _uint(f[2], f"{path}.repeats", 0, 1 << 24)
    status = _str(f[3], f"{path}.status", 32)
    if status not in STATUSES:
        _fail(f"{path}.status", f"unknown timing status '{status}'")
    flags = _uint(f[4], f"{path}.flags", 0, 0xFFFF)
    if median < 0:
        _fail(f"{path}.median_us", "negative time")
    if spread < 0:
        _fail(f"{path}.spread_us", "negative spread")
    if status == "ok" and not median > 0:
        _fail(f"{path}.median_us", "status ok needs a positive time")
    if median > 3.6e9:
        _fail(f"{path}.median_us", "implausible time (over an hour)")
    return median, spread, repeats, status, flags


def _read_templates(v: Any, path: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(v, list):
        _fail(path, f"expected array, got {_type_name(v)}")
    if len(v) > MAX_TEMPLATES:
        _fail(path, f"more than {MAX_TEMPLATES} entries")
    pairs: list[tuple[str, str]] = []
    for i, t in enumerate(v):
        tf = _array(t, 2, f"{path}[{i}]")
        pairs.append((_str(tf[0], f"{path}[{i}].name", MAX_TEMPLATE_NAME),
                      _str(tf[1], f"{path}[{i}].sha256")))
        _check_template(pairs, i, path)
    return tuple(pairs)


def _read_shard(v: Any, path: str, version: int = VERSION) -> Shard:
    n = {1: 8, 2: 10}.get(version, 11)
    if not isinstance(v, list):
        _fail(path, f"expected array, got {_type_name(v)}")
    if len(v) != n:
        _fail(path, f"expected array of {n} (a wire version {version} shard), got {len(v)}")
    f = v
    sid = _str(f[0], f"{path}.id", 128)
    if not _SHARD_ID.match(sid):
        _fail(f"{path}.id", "shard id must match [A-Za-z0-9._:/-]{1,128}")
    pf = _array(f[3], 4, f"{path}.producer")
    producer = Producer(*(_str(x, f"{path}.producer.{n}") for x, n in
                          zip(pf, ("name", "public_key", "runner", "software_version"))))
    if producer.runner not in RUNNERS:
        _fail(f"{path}.producer.runner", f"unknown runner '{producer.runner}'")
    problems_raw = f[5]
    if not isinstance(problems_raw, list):
        _fail(f"{path}.problems", f"expected array, got {_type_name(problems_raw)}")
    if len(problems_raw) > MAX_PROBLEMS:
        _fail(f"{path}.problems", f"more than {MAX_PROBLEMS} problems")
    problems = [_read_problem(p, f"{path}.problems[{i}]", version) for i, p in enumerate(problems_raw)]
    records_raw = f[6]
    if not isinstance(records_raw, list):
        _fail(f"{path}.records", f"expected array, got {_type_name(records_raw)}")
    if len(records_raw) > MAX_RECORDS:
        _fail(f"{path}.records", f"more than {MAX_RECORDS} records")
    records = []
    for i, r in enumerate(records_raw):
        rp = f"{path}.records[{i}]"
        rf = _array(r, 7, rp)
        idx = _uint(rf[0], f"{rp}.problem_index", 0, MAX_PROBLEMS)
        if idx >= len(problems):
            _fail(f"{rp}.problem_index", f"index {idx} but only {len(problems)} problems")
        records.append(ShardRecord(idx, _read_config(rf[1], f"{rp}.config"), *_read_timing(rf[2:], rp)))
    method, wall = CollectionMethod(), ()
    if version != 1:
        mf = _array(f[7], 2, f"{path}.method")
        method = CollectionMethod(_str(mf[0], f"{path}.method.timing"),
                                  _str(mf[1], f"{path}.method.collector"))
        wall_raw = f[8]
        if not isinstance(wall_raw, list):
            _fail(f"{path}.problem_wall_s", f"expected array, got {_type_name(wall_raw)}")
        if wall_raw and len(wall_raw) != len(problems):
            _fail(f"{path}.problem_wall_s",
                  f"expected 0 or {len(problems)} values (one per problem), got {len(wall_raw)}")
        for i, w in enumerate(wall_raw):
            if _float(w, f"{path}.problem_wall_s[{i}]") < 0:
                _fail(f"{path}.problem_wall_s[{i}]", "negative wall time")
        wall = tuple(wall_raw)
    templates: tuple[tuple[str, str], ...] = ()
    if version >= 3:
        templates = _read_templates(f[9], f"{path}.templates")
    digest = f[-1]
    if not isinstance(digest, bytes):
        _fail(f"{path}.sha256", f"expected bin, got {_type_name(digest)}")
    if len(digest) != 32:
        _fail(f"{path}.sha256", "expected 32 bytes")
    s = Shard(sid, _str(f[1], f"{path}.sweep_id", 128), _read_hw(f[2], f"{path}.hardware"),
              producer, _uint(f[4], f"{path}.created_ms", 0, (1 << 64) - 1), problems, records,
              digest, method, wall, version, templates)
    if content_hash(s) != digest:
        _fail(f"{path}.sha256", "content hash does not match (corrupted or tampered shard)")
    return s


def _open(data: bytes) -> tuple[int, str, Any]:
    if not data:
        _fail("message", "empty input")
    if len(data) > MAX_MESSAGE_BYTES:
        _fail("message", f"larger than {MAX_MESSAGE_BYTES} bytes")
    try:
        top = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True,
                              object_pairs_hook=_Pairs, max_str_len=MAX_STRING, max_bin_len=64,
                              max_array_len=MAX_RECORDS + 16, max_map_len=64, max_ext_len=0)
    except msgpack.ExtraData as e:
        _fail("message", f"{len(e.extra)} trailing bytes")
    except (ValueError, msgpack.UnpackException, TypeError) as e:
        _fail("message", f"malformed msgpack ({e})")
    f = _array(top, 4, "message")
    if _str(f[0], "message.magic", 16) != "diode":
        _fail("message", "not a diode message (bad magic)")
    version = _uint(f[1], "message.version", 0, (1 << 64) - 1)
    if not MIN_VERSION <= version <= MAX_VERSION:
        _fail("message.version", f"unsupported wire version {version} "
                                 f"(this build reads versions {MIN_VERSION} to {MAX_VERSION})")
    return version, _str(f[2], "message.kind", 32), f[3]


_READERS: dict[str, Callable[[Any, str, int], Any]] = {
    "hardware": lambda v, p, version: _read_hw(v, p),
    "problem": _read_problem,
    "config": lambda v, p, version: _read_config(v, p),
    "record": lambda v, p, version: TimingRecord(_read_problem(_array(v, 7, p)[0], f"{p}.problem", version),
                                                 _read_config(v[1], f"{p}.config"), *_read_timing(v[2:], p)),
    "shard": _read_shard,
}


def decode(data: bytes, expect: str | None = None) -> Any:
    """Decode one message; `expect` names the kind required ("shard", ...)."""
    version, kind, body = _open(data)
    if expect is not None and kind != expect:
        _fail("message", f"expected kind '{expect}', got '{kind}'")
    if kind not in _READERS:
        _fail("message.kind", f"unknown kind '{kind}'")
    # The shard's layout and, from version 3 on, the problem's depend on the version.
    return _READERS[kind](body, kind, version)


def decode_shard(data: bytes) -> Shard:
    return decode(data, "shard")


# ------------------------------------------------------------------ JSON form

def to_json(value: Any) -> Any:
    """The JSON form used by tests/golden/cases.json and the C++ CLI."""
    if isinstance(value, KernelConfig):
        d = {k: getattr(value, k) for k in ("template", "block_m", "block_n", "block_k", "group_m",
                                             "num_stages", "num_warps", "even_k", "allow_tf32",
                                             "use_fast_accum", "acc_type")}
        d["extra"] = dict(value.extra)
        return d
    if isinstance(value, Problem):  # "scale" only when not "none", as C++ writes it
        d = dict(value.__dict__)
        if value.scale == "none":
            del d["scale"]
        return d
    if isinstance(value, (HardwareId, Producer)):
        return dict(value.__dict__)
    if isinstance(value, TimingRecord):
        return {"median_us": value.median_us, "spread_us": value.spread_us, "repeats": value.repeats,
                "status": value.status, "flags": value.flags,
                "problem": to_json(value.problem), "config": to_json(value.config)}
    if isinstance(value, Shard):  # as the C++ to_json(Shard) writes it
        return {"wire_version": value.wire_version, "id": value.id, "sweep_id": value.sweep_id,
                "hardware": to_json(value.hardware), "producer": to_json(value.producer),
                "created_ms": value.created_ms, "problems": [to_json(p) for p in value.problems],
                "records": [{"problem_index": r.problem_index, "config": to_json(r.config),
                             "median_us": r.median_us, "spread_us": r.spread_us, "repeats": r.repeats,
                             "status": r.status, "flags": r.flags} for r in value.records],
                "method": {"timing": value.method.timing, "collector": value.method.collector},
                "problem_wall_s": list(value.problem_wall_s), "sha256": bytes(value.sha256).hex(),
                **({"templates": [{"name": n, "sha256": h} for n, h in value.templates]}
                   if value.templates else {})}
    raise TypeError(type(value).__name__)


def hardware_from_json(d: dict) -> HardwareId:
    return HardwareId(**d)


def problem_from_json(d: dict) -> Problem:
    return validate_problem(Problem(**{**d, "alpha": float(d["alpha"]), "beta": float(d["beta"])}))


def config_from_json(d: dict) -> KernelConfig:
    d = dict(d)
    extra = tuple(sorted(d.pop("extra").items(), key=lambda kv: kv[0].encode()))
    return KernelConfig(**d, extra=extra)


def record_from_json(d: dict) -> TimingRecord:
    return TimingRecord(problem_from_json(d["problem"]), config_from_json(d["config"]),
                        float(d["median_us"]), float(d["spread_us"]), d["repeats"], d["status"], d["flags"])


def shard_from_json(d: dict) -> Shard:
    """As C++ shard_from_json: wire_version, method, problem_wall_s and templates are
    optional (a version 2 shard without method or wall times, or a version 3 one
    without templates); sha256, if present, is checked."""
    version = d.get("wire_version", VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or not MIN_VERSION <= version <= MAX_VERSION:
        _fail("shard.wire_version", f"unsupported wire version {version}")
    m = d.get("method", {"timing": "", "collector": ""})
    if set(m) != {"timing", "collector"}:
        _fail("shard.method", "expected an object with exactly timing and collector")
    problems = [problem_from_json(p) for p in d["problems"]]
    wall = tuple(float(w) for w in d.get("problem_wall_s", ()))
    if wall and len(wall) != len(problems):
        _fail("shard.problem_wall_s", f"expected 0 or {len(problems)} values (one per problem), got {len(wall)}")
    for i, w in enumerate(wall):
        if not math.isfinite(w) or w < 0:
            _fail(f"shard.problem_wall_s[{i}]", "must be finite and >= 0")
    s = Shard(d["id"], d["sweep_id"], hardware_from_json(d["hardware"]), Producer(**d["producer"]),
              d["created_ms"], problems,
              [ShardRecord(r["problem_index"], config_from_json(r["config"]), float(r["median_us"]),
                           float(r["spread_us"]), r["repeats"], r["status"], r["flags"])
               for r in d["records"]],
              method=CollectionMethod(m["timing"], m["collector"]), problem_wall_s=wall, wire_version=version)
    templates = d.get("templates", [])
    for i, t in enumerate(templates):
        if not isinstance(t, dict) or set(t) != {"name", "sha256"}:
            _fail(f"shard.templates[{i}]", "expected an object with exactly name and sha256")
    s.templates = check_templates(tuple((t["name"], t["sha256"]) for t in templates))
    seal(s)  # raises if a version 1 shard has a method or wall times
    if "sha256" in d and d["sha256"] != s.sha256.hex():
        _fail("shard.sha256", "does not match the content")
    return s


__all__ = ["WireError", "HardwareId", "Problem", "KernelConfig", "TimingRecord", "Producer",
           "ShardRecord", "CollectionMethod", "Shard", "encode", "decode", "decode_shard", "seal", "content_hash",
           "replace", "FAMILIES", "family_of", "write_version", "check_templates"]
