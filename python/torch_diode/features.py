"""Feature extraction, mirroring shared/src/features.cpp exactly.

The C++ definition is the reference; tests/python/test_features_golden.py
checks this module against the vectors C++ wrote to tests/golden/features.json
(GEMM) and tests/golden/features_scaled_mm.json (scaled_mm).
Arithmetic is done in float64 and rounded to float32 at the end, as in C++.

Each decision family (shared/schema/contracts.json "families") has its own
feature names: "gemm" the base names, "scaled_mm" the base names (computed the
same way, dtype_bytes 1 for float8) followed by scale_rowwise and fast_accum.
The template one-hot block follows the family's names in both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .wire import KernelConfig, Problem, WireError, family_of

SPEC_VERSION = 1

BASE_FEATURE_NAMES = (
    "log2_m", "log2_n", "log2_k", "log2_batch", "dtype_bytes", "is_fp32", "trans_a", "trans_b",
    "has_bias", "log2_flops", "log2_bytes", "log2_intensity",
    "log2_block_m", "log2_block_n", "log2_block_k", "log2_group_m", "num_stages", "log2_num_warps",
    "even_k", "allow_tf32", "log2_smem_bytes",
    "log2_tiles", "log2_waves", "wave_efficiency", "m_waste", "n_waste", "k_waste",
    "log2_k_iters", "log2_tile_intensity",
)

# The decision families with a feature definition, and each one's names before the template block.
FAMILY_FEATURE_NAMES = {
    "gemm": BASE_FEATURE_NAMES,
    "scaled_mm": BASE_FEATURE_NAMES + ("scale_rowwise", "fast_accum"),
}

_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float8_e4m3fn": 1}


@dataclass
class FeatureSpec:
    templates: list[str] = field(default_factory=lambda: [
        "triton::mm", "triton::bmm", "triton::mm_persistent_tma", "decompose_k", "aten"])
    sm_count: int = 132
    mean: list[float] = field(default_factory=list)
    stddev: list[float] = field(default_factory=list)
    # The decision family ("gemm" or "scaled_mm"); in to_json only when not "gemm".
    family: str = "gemm"

    @property
    def names(self) -> list[str]:
        if self.family not in FAMILY_FEATURE_NAMES:
            raise ValueError(f"unknown decision family {self.family!r} (expected gemm or scaled_mm)")
        return list(FAMILY_FEATURE_NAMES[self.family]) + [f"template={t}" for t in self.templates]

    def to_json(self) -> dict:
        j = {"version": SPEC_VERSION, "names": self.names, "templates": list(self.templates),
             "sm_count": self.sm_count, "mean": list(self.mean), "stddev": list(self.stddev)}
        if self.family != "gemm":
            j["family"] = self.family
        return j

    @classmethod
    def from_json(cls, j: dict) -> "FeatureSpec":
        if not isinstance(j, dict):
            raise WireError("feature_spec: expected object")
        for key in ("version", "names", "templates", "sm_count", "mean", "stddev"):
            if key not in j:
                raise WireError(f"feature_spec: missing field '{key}'")
        if j["version"] != SPEC_VERSION:
            raise WireError(f"feature_spec: unsupported feature spec version (this build reads version {SPEC_VERSION})")
        family = j.get("family", "gemm")
        if not isinstance(family, str):
            raise WireError("feature_spec: field 'family' must be a string")
        if family not in FAMILY_FEATURE_NAMES:
            raise WireError(f"feature_spec: unknown family {family!r:.80} (this build knows gemm and scaled_mm)")
        spec = cls(list(j["templates"]), int(j["sm_count"]), [float(x) for x in j["mean"]],
                   [float(x) for x in j["stddev"]], family)
        if list(j["names"]) != spec.names:
            raise WireError("feature_spec: feature names differ from this build's definition")
        n = len(spec.names)
        if spec.mean and (len(spec.mean) != n or len(spec.stddev) != n):
            raise WireError("feature_spec: mean/stddev length differs from the number of features")
        if spec.sm_count <= 0:
            raise WireError("feature_spec: sm_count must be positive")
        return spec


def _lg(x: float) -> float:
    return math.log2(max(x, 1.0))


def _ceil_div(a: float, b: float) -> float:
    return float(math.ceil(a / b))


def _f32(x: float) -> float:
    import struct
    return struct.unpack("f", struct.pack("f", x))[0]


def raw_features(spec: FeatureSpec, p: Problem, c: KernelConfig) -> list[float]:
    """Unnormalised features, each rounded to float32 like the C++ vector<float>.
    Raises ValueError when p's op is not of spec.family."""
    fam = family_of(p.op)
    if fam != spec.family:
        raise ValueError(f"features: problem op {p.op!r} is of family {fam!r}, "
                         f"the feature spec is of family {spec.family!r}")
    m, n, k, b = float(p.m), float(p.n), float(p.k), float(p.batch)
    in_bytes, out_bytes = float(_DTYPE_BYTES[p.dtype_a]), float(_DTYPE_BYTES[p.dtype_out])
    flops = 2.0 * b * m * n * k
    nbytes = b * ((m * k + k * n) * in_bytes + m * n * out_bytes)
    triton = c.block_m > 0 and c.block_n > 0 and c.block_k > 0
    bm = float(c.block_m) if triton else 128.0
    bn = float(c.block_n) if triton else 128.0
    bk = float(c.block_k) if triton else 64.0
    tiles = b * _ceil_div(m, bm) * _ceil_div(n, bn)
    sms = max(1.0, float(spec.sm_count))
    waves = _ceil_div(tiles, sms)
    k_iters = _ceil_div(k, bk)
    smem = (bm * bk + bk * bn) * in_bytes * max(1.0, float(c.num_stages))
    tile_intensity = (2.0 * bm * bn * bk) / ((bm * bk + bk * bn) * in_bytes)
    v = [
        _lg(m), _lg(n), _lg(k), _lg(b), in_bytes, 1.0 if p.dtype_a == "float32" else 0.0,
        1.0 if p.trans_a else 0.0, 1.0 if p.trans_b else 0.0, 1.0 if p.bias != "none" else 0.0,
        _lg(flops), _lg(nbytes), math.log2(flops / nbytes),
        _lg(bm), _lg(bn), _lg(bk), _lg(float(c.group_m)), float(c.num_stages), _lg(float(c.num_warps)),
        1.0 if c.even_k else 0.0, 1.0 if c.allow_tf32 else 0.0, _lg(smem),
        _lg(tiles), _lg(waves), tiles / (waves * sms),
        _ceil_div(m, bm) * bm / m - 1.0, _ceil_div(n, bn) * bn / n - 1.0, k_iters * bk / k - 1.0,
        _lg(k_iters), math.log2(tile_intensity),
    ]
    if spec.family == "scaled_mm":
        v += [1.0 if p.scale == "row" else 0.0, 1.0 if c.use_fast_accum else 0.0]
    v += [1.0 if c.template == t else 0.0 for t in spec.templates]
    return [_f32(x) for x in v]


def features(spec: FeatureSpec, p: Problem, c: KernelConfig) -> list[float]:
    """Normalised features: (raw - mean) / stddev, as float32 values."""
    raw = raw_features(spec, p, c)
    if not spec.mean:
        return raw
    return [_f32((x - mu) / (sd if sd > 0 else 1.0)) for x, mu, sd in zip(raw, spec.mean, spec.stddev)]
