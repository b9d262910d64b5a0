"""Loading a diode model directory (docs/model-format.md) into a torch module.

The directory holds `model.json` (architecture, feature spec, metadata) and
`weights.msgpack` (named float32 tensors). Loading never unpickles anything:
msgpack yields only plain values, and every tensor is checked against the shape
the architecture implies before it is copied into a module built here.
"""
from __future__ import annotations

import array
import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import msgpack

from .features import FeatureSpec
from .wire import WireError

FORMAT = "diode-model"
VERSION = 1
WEIGHTS_MAGIC = "diode-weights"
WEIGHTS_VERSION = 1
MAX_TENSORS = 1024
MAX_WEIGHTS_BYTES = 64 << 20
MAX_MODEL_JSON_BYTES = 4 << 20
# Sanity bounds on the architecture: a model the hook runs inside every compile.
MAX_HIDDEN = 8192
MAX_BLOCKS = 64
ACTIVATIONS = ("relu", "silu")
TARGETS = ("log_us",)


class ModelFormatError(ValueError):
    """The model directory does not follow docs/model-format.md; the message says where."""


@dataclass(frozen=True)
class Architecture:
    kind: str
    input: int
    hidden: int
    blocks: int
    activation: str

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        d, h = self.input, self.hidden
        shapes: dict[str, tuple[int, ...]] = {"input.weight": (h, d), "input.bias": (h,)}
        for i in range(self.blocks):
            for fc in ("fc1", "fc2"):
                shapes[f"blocks.{i}.{fc}.weight"] = (h, h)
                shapes[f"blocks.{i}.{fc}.bias"] = (h,)
        shapes["head.weight"] = (1, h)
        shapes["head.bias"] = (1,)
        return shapes


@dataclass
class ModelInfo:
    """Everything in model.json the hook uses, plus where it came from."""
    path: str
    hardware_key: str
    architecture: Architecture
    feature_spec: FeatureSpec
    target: str
    model_id: str  # sha256 over model.json and weights.msgpack, hex: changes with any retraining
    meta: dict[str, Any] = field(default_factory=dict)  # dataset / metrics / training, as written
    # dataset.domain: {"batch"|"m"|"n"|"k": (min, max)} of the problems the model was trained
    # on (diode-train writes it); None for models written before it. The hook does not use a
    # model outside it (docs/hook.md, Modes).
    domain: dict[str, tuple[int, int]] | None = None

    def in_domain(self, batch: int, m: int, n: int, k: int) -> bool:
        """Whether a problem's sizes lie within the training problems' ranges (True without a domain)."""
        if self.domain is None:
            return True
        return all(lo <= v <= hi for v, (lo, hi) in
                   zip((batch, m, n, k), (self.domain[d] for d in DOMAIN_KEYS)))


def _fail(where: str, what: str) -> None:
    raise ModelFormatError(f"{where}: {what}")


def _int_field(arch: dict, name: str, lo: int, hi: int) -> int:
    v = arch.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        _fail(f"model.json architecture.{name}", f"expected an integer in [{lo}, {hi}], got {v!r}")
    return v


DOMAIN_KEYS = ("batch", "m", "n", "k")


def parse_domain(dataset: Any) -> dict[str, tuple[int, int]] | None:
    """model.json dataset.domain, strictly: absent -> None; otherwise every key of DOMAIN_KEYS
    with [min, max], integers, 1 <= min <= max < 2**63."""
    if not isinstance(dataset, dict) or "domain" not in dataset:
        return None
    d = dataset["domain"]
    if not isinstance(d, dict) or set(d) != set(DOMAIN_KEYS):
        _fail("model.json dataset.domain", f"expected an object with keys {list(DOMAIN_KEYS)}, got {d!r:.200}")
    out = {}
    for key in DOMAIN_KEYS:
        v = d[key]
        if (not isinstance(v, list) or len(v) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x < 2 ** 63 for x in v)
                or v[0] > v[1]):
            _fail(f"model.json dataset.domain.{key}", f"expected [min, max] integers, 1 <= min <= max, got {v!r:.100}")
        out[key] = (v[0], v[1])
    return out


def parse_model_json(text: bytes, path: str = "<memory>") \
        -> tuple[Architecture, FeatureSpec, dict[str, tuple[int, int]] | None, dict]:
    try:
        j = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise ModelFormatError(f"model.json: not valid JSON ({e})") from None
    if not isinstance(j, dict):
        _fail("model.json", "expected an object")
    if j.get("format") != FORMAT:
        _fail("model.json format", f"expected '{FORMAT}', got {j.get('format')!r}")
    if j.get("version") != VERSION:
        _fail("model.json version", f"unsupported version {j.get('version')!r} (this build reads {VERSION})")
    arch = j.get("architecture")
    if not isinstance(arch, dict):
        _fail("model.json architecture", "missing or not an object")
    if arch.get("kind") != "residual_mlp":
        _fail("model.json architecture.kind", f"unsupported architecture {arch.get('kind')!r}")
    a = Architecture(
        kind="residual_mlp",
        input=_int_field(arch, "input", 1, 4096),
        hidden=_int_field(arch, "hidden", 1, MAX_HIDDEN),
        blocks=_int_field(arch, "blocks", 0, MAX_BLOCKS),
        activation=arch.get("activation"),
    )
    if a.activation not in ACTIVATIONS:
        _fail("model.json architecture.activation", f"expected one of {ACTIVATIONS}, got {a.activation!r}")
    try:
        spec = FeatureSpec.from_json(j.get("feature_spec"))
    except WireError as e:
        raise ModelFormatError(f"model.json {e}") from None
    if len(spec.names) != a.input:
        _fail("model.json architecture.input",
              f"{a.input} differs from the feature spec's {len(spec.names)} features")
    for name, values in (("mean", spec.mean), ("stddev", spec.stddev)):
        if not all(math.isfinite(x) for x in values):
            _fail(f"model.json feature_spec.{name}", "non-finite value")
    if j.get("target") not in TARGETS:
        _fail("model.json target", f"expected one of {TARGETS}, got {j.get('target')!r}")
    hw = j.get("hardware_key")
    if not isinstance(hw, str) or not hw:
        _fail("model.json hardware_key", "missing or not a string")
    domain = parse_domain(j.get("dataset"))  # malformed: refused here, with the rest of model.json
    return a, spec, domain, j


def parse_weights(data: bytes, arch: Architecture) -> dict[str, tuple[tuple[int, ...], bytes]]:
    """Returns name -> (shape, little-endian float32 bytes), checked against `arch`."""
    if len(data) > MAX_WEIGHTS_BYTES:
        _fail("weights.msgpack", f"{len(data)} bytes exceeds the limit of {MAX_WEIGHTS_BYTES}")
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True,
                              max_bin_len=MAX_WEIGHTS_BYTES, max_array_len=MAX_TENSORS * 4,
                              max_map_len=0, max_ext_len=0)
    except Exception as e:  # msgpack raises several unrelated types for malformed input
        raise ModelFormatError(f"weights.msgpack: not valid msgpack ({type(e).__name__}: {e})") from None
    if not isinstance(obj, list) or len(obj) != 3:
        _fail("weights.msgpack", "expected a 3-element array [magic, version, tensors]")
    if obj[0] != WEIGHTS_MAGIC:
        _fail("weights.msgpack[0]", f"expected '{WEIGHTS_MAGIC}', got {obj[0]!r}")
    if obj[1] != WEIGHTS_VERSION or isinstance(obj[1], bool):
        _fail("weights.msgpack[1]", f"unsupported weights version {obj[1]!r}")
    tensors = obj[2]
    if not isinstance(tensors, list) or len(tensors) > MAX_TENSORS:
        _fail("weights.msgpack[2]", f"expected an array of at most {MAX_TENSORS} tensors")
    expected = arch.expected_shapes()
    out: dict[str, tuple[tuple[int, ...], bytes]] = {}
    for i, t in enumerate(tensors):
        where = f"weights.msgpack tensors[{i}]"
        if not isinstance(t, list) or len(t) != 4:
            _fail(where, "expected [name, dtype, shape, data]")
        name, dtype, shape, blob = t
        if not isinstance(name, str):
            _fail(f"{where}.name", "expected str")
        where = f"weights.msgpack tensor '{name}'"
        if dtype != "float32":
            _fail(where, f"dtype must be 'float32', got {dtype!r}")
        if (not isinstance(shape, list) or
                not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)):
            _fail(where, f"shape must be an array of uints, got {shape!r}")
        if not isinstance(blob, bytes):
            _fail(where, "data must be msgpack bin")
        if name in out:
            _fail(where, "duplicate tensor name")
        if name not in expected:
            _fail(where, "not part of the residual_mlp architecture")
        if tuple(shape) != expected[name]:
            _fail(where, f"shape {tuple(shape)} differs from the architecture's {expected[name]}")
        if len(blob) != math.prod(shape) * 4:
            _fail(where, f"data has {len(blob)} bytes, shape needs {math.prod(shape) * 4}")
        out[name] = (tuple(shape), blob)
    missing = sorted(set(expected) - set(out))
    if missing:
        _fail("weights.msgpack", f"missing tensors {missing}")
    return out


def build_module(arch: Architecture, tensors: dict[str, tuple[tuple[int, ...], bytes]]):
    """The residual MLP of docs/model-format.md, weights copied from `tensors`."""
    import torch

    from .hook._mlp import ResidualMLP

    module = ResidualMLP(arch.input, arch.hidden, arch.blocks, arch.activation)
    state = {}
    for name, (shape, blob) in tensors.items():
        buf = bytearray(blob)
        if sys.byteorder != "little":  # the format is little-endian; swap on big-endian hosts
            a = array.array("f")
            a.frombytes(bytes(buf))
            a.byteswap()
            buf = bytearray(a.tobytes())
        t = torch.frombuffer(buf, dtype=torch.float32).reshape(shape)
        if not bool(torch.isfinite(t).all()):
            _fail(f"weights.msgpack tensor '{name}'", "contains a non-finite value")
        state[name] = t
    module.load_state_dict(state, strict=True)
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def read_model_dir(path: str | os.PathLike) -> tuple[ModelInfo, dict]:
    """Validates a model directory; returns its info and the checked raw tensors."""
    path = os.fspath(path)
    mj, wm = os.path.join(path, "model.json"), os.path.join(path, "weights.msgpack")
    for f in (mj, wm):
        if not os.path.isfile(f):
            _fail(path, f"missing {os.path.basename(f)}")
    if os.path.getsize(mj) > MAX_MODEL_JSON_BYTES:
        _fail("model.json", f"larger than {MAX_MODEL_JSON_BYTES} bytes")
    if os.path.getsize(wm) > MAX_WEIGHTS_BYTES:
        _fail("weights.msgpack", f"larger than {MAX_WEIGHTS_BYTES} bytes")
    with open(mj, "rb") as f:
        text = f.read()
    with open(wm, "rb") as f:
        data = f.read()
    arch, spec, domain, j = parse_model_json(text, mj)
    tensors = parse_weights(data, arch)
    h = hashlib.sha256()
    h.update(len(text).to_bytes(8, "little") + text)
    h.update(data)
    meta = {k: j[k] for k in ("dataset", "metrics", "training") if k in j}
    info = ModelInfo(path=os.path.abspath(path), hardware_key=j["hardware_key"], architecture=arch,
                     feature_spec=spec, target=j["target"], model_id=h.hexdigest(), meta=meta,
                     domain=domain)
    return info, tensors


@dataclass
class LoadedModel:
    info: ModelInfo
    module: Any  # hook._mlp.ResidualMLP
    # Where the hook found it (hook/sources.py: "explicit", "env", "hub", "cache", "package")
    # and the signed bundle version; None for a model loaded directly.
    source: str | None = None
    bundle_version: int | None = None


def load_model_dir(path: str | os.PathLike) -> LoadedModel:
    """Reads, validates and builds a model directory. Raises ModelFormatError."""
    info, tensors = read_model_dir(path)
    return LoadedModel(info=info, module=build_module(info.architecture, tensors))
