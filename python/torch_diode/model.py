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
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import msgpack

from .features import FeatureSpec
from .wire import WireError

if TYPE_CHECKING:
    import numpy as np

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
# An ensemble (architecture.members > 1) ranks with a cascade: member 0 scores every config,
# the other members only the `cascade` configs member 0 ranks best (and the ATen ones), so
# that ranking costs about one forward whatever the number of members.
MAX_MEMBERS = 16
MAX_CASCADE = 4096
# Added to member 0's prediction of a config outside the cascade: it then ranks after every
# config the ensemble scored (their means are log times, far below 1000), in member 0's order.
# Such a score is an order, not a time estimate.
CASCADE_OFFSET = 1000.0
# An ensemble may carry a pre-filter (architecture.prefilter): a much smaller residual_mlp that
# scores every config first and hands only its `keep` best (and the ATen configs) to member 0
# and the cascade (prefilter_scores). MAX_KEEP bounds `keep` as MAX_CASCADE bounds `cascade`.
MAX_KEEP = 4096
# Added to the pre-filter's prediction of a config it does not keep: it then ranks after every
# config of the kept set (whose scores are below CASCADE_OFFSET + a log time), in the pre-filter's
# order. Such a score is an order, not a time estimate. (C++: MlpInfer::kPrefilterOffset.)
PREFILTER_OFFSET = 2000.0
# Prefix of the pre-filter's tensor names in weights.msgpack (after every member's tensors).
PREFILTER_PREFIX = "prefilter."


class ModelFormatError(ValueError):
    """The model directory does not follow docs/model-format.md; the message says where."""


def _residual_shapes(d: int, h: int, blocks: int) -> dict[str, tuple[int, ...]]:
    """One residual_mlp's tensors, unprefixed: input width d, hidden h, `blocks` blocks."""
    shapes: dict[str, tuple[int, ...]] = {"input.weight": (h, d), "input.bias": (h,)}
    for i in range(blocks):
        for fc in ("fc1", "fc2"):
            shapes[f"blocks.{i}.{fc}.weight"] = (h, h)
            shapes[f"blocks.{i}.{fc}.bias"] = (h,)
    shapes["head.weight"] = (1, h)
    shapes["head.bias"] = (1,)
    return shapes


@dataclass(frozen=True)
class Prefilter:
    """model.json architecture.prefilter of an ensemble: a residual_mlp of `hidden` x `blocks`
    (the architecture's input width, activation and feature_spec) whose `keep` lowest-scored
    configs, and the ATen ones, are what the ensemble scores (prefilter_scores)."""
    hidden: int
    blocks: int
    keep: int


@dataclass(frozen=True)
class Architecture:
    kind: str
    input: int
    hidden: int
    blocks: int
    activation: str
    members: int = 1            # architecture.members: ensemble members, each a residual_mlp as above
    cascade: int | None = None  # architecture.cascade: members 1.. score member 0's best `cascade`
    prefilter: Prefilter | None = None  # architecture.prefilter (ensembles only); None: absent

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Tensor name -> shape; an ensemble's names carry `members.{j}.` for each member j,
        then its pre-filter's (if any) `prefilter.`."""
        one = self.member_shapes()
        if self.members == 1:
            return one
        shapes = {f"{member_prefix(j)}{name}": shape for j in range(self.members) for name, shape in one.items()}
        if self.prefilter is not None:
            shapes.update({PREFILTER_PREFIX + name: shape for name, shape in self.prefilter_shapes().items()})
        return shapes

    def member_shapes(self) -> dict[str, tuple[int, ...]]:
        """One residual_mlp's tensors, unprefixed."""
        return _residual_shapes(self.input, self.hidden, self.blocks)

    def prefilter_shapes(self) -> dict[str, tuple[int, ...]]:
        """The pre-filter's tensors, unprefixed ({} without a pre-filter)."""
        if self.prefilter is None:
            return {}
        return _residual_shapes(self.input, self.prefilter.hidden, self.prefilter.blocks)


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
    # selection.aten_margin: predict mode's ATen margin chosen for this model at release, on
    # its validation split (python/release/release_bundles.sh, bench/aten_margin_choice.py);
    # None for a model without one (the hook then uses ranking.DEFAULT_ATEN_MARGIN).
    aten_margin: float | None = None
    # selection.aten_rule: how that margin was chosen and is to be read for an ensemble
    # ("mean" | "every_member": hook/ranking.ATEN_RULES); None for a model without one ("mean").
    aten_rule: str | None = None
    # provenance (issue 54): where the training data came from, parse_provenance's dict
    # {"torch_versions": [...], "triton_versions": [...], "templates": {family: [sha256 hex]}}
    # (only the keys model.json has); None for a model without one. hook/staleness.py reads it.
    provenance: dict[str, Any] | None = None

    def in_domain(self, batch: int, m: int, n: int, k: int) -> bool:
        """Whether a problem's sizes lie within the training problems' ranges (True without a domain)."""
        if self.domain is None:
            return True
        return all(lo <= v <= hi for v, (lo, hi) in
                   zip((batch, m, n, k), (self.domain[d] for d in DOMAIN_KEYS)))


def member_prefix(j: int) -> str:
    """Prefix of member j's tensor names in an ensemble's weights.msgpack."""
    return f"members.{j}."


def is_aten_template(template: str) -> bool:
    """Whether a config is an ATen kernel (`aten`, as the collector records the op's own
    kernel, or `aten::...`): an ensemble always scores those with every member, so that
    the hook's ATen-against-Triton decision compares ensemble means."""
    return template == "aten" or template.startswith("aten::")


def lowest_mask(a: np.ndarray, k: int) -> np.ndarray:
    """Bool mask of np.argsort(a, kind="stable")[:k] (the k lowest, ties to the lower index,
    NaN last) without sorting `a`: one np.partition finds the k-th lowest value, every value
    below it is in and the ties at it go to the lower indices. The hook ranks with it
    (cascade_set, ranking._lowest), so a miss of ~1,400 configs sorts only the few it keeps."""
    import numpy as np  # the hook's dependency (with torch), not the model reader's

    n = len(a)
    m = np.zeros(n, dtype=bool)
    if k >= n:
        m[:] = True
        return m
    if k <= 0:
        return m
    v = np.partition(a, k - 1)[k - 1]
    if v != v:   # NaN (never from the model): the plain sort
        m[np.argsort(a, kind="stable")[:k]] = True
        return m
    np.less(a, v, out=m)   # NaN compares false: partition put them last, as argsort does
    short = k - int(np.count_nonzero(m))
    if short:   # ties at v: the lowest indices among those equal to v
        m[np.flatnonzero(a == v)[:short]] = True
    return m


def cascade_set(p0: np.ndarray, aten: np.ndarray, cascade: int) -> np.ndarray:
    """Bool mask of the candidates every member scores: the `cascade` lowest member-0
    predictions (ties to the lower index: a stable sort; lowest_mask), and every ATen
    candidate."""
    import numpy as np

    s = lowest_mask(p0, cascade)
    s |= np.asarray(aten, dtype=bool)
    return s


def cascade_scores(p0: np.ndarray, aten: np.ndarray, cascade: int,
                   others_on: Callable[[np.ndarray], Sequence[np.ndarray]]) -> np.ndarray:
    """Ranking scores of an ensemble's candidates, float32 (docs/model-format.md, ensembles).

    p0: member 0's float32 prediction per candidate; aten: bool per candidate
    (is_aten_template); others_on(idx): the float32 predictions of members 1..N-1 on the
    candidates `idx` (ascending indices), one array per member in member order. In the
    cascade set (cascade_set) a score is float32 of the float64 mean of the members'
    predictions, summed in member order; outside it, float32(float64(p0) + CASCADE_OFFSET).
    The C++ ranker computes the same bits."""
    import numpy as np

    p0 = np.asarray(p0, dtype=np.float32)
    idx = np.flatnonzero(cascade_set(p0, aten, cascade))
    scores = (p0.astype(np.float64) + CASCADE_OFFSET).astype(np.float32)
    total = p0[idx].astype(np.float64)
    others = others_on(idx)
    if isinstance(others, np.ndarray):   # [members - 1, len(idx)]: one conversion for all members
        o64 = np.asarray(others, dtype=np.float32).astype(np.float64)
    else:
        o64 = [np.asarray(p, dtype=np.float32).astype(np.float64) for p in others]
    for p in o64:  # member order, one float64 addition at a time (as the C++ loop)
        total = total + p
    scores[idx] = (total / (len(o64) + 1)).astype(np.float32)
    return scores


def prefilter_set(q: np.ndarray, aten: np.ndarray, keep: int) -> np.ndarray:
    """Bool mask of the candidates a pre-filter keeps (the set P): the `keep` lowest
    pre-filter predictions (ties to the lower index: a stable sort), and every ATen
    candidate; every candidate when there are at most `keep`. The rule of cascade_set."""
    return cascade_set(q, aten, keep)


def prefilter_scores(q: np.ndarray, aten: np.ndarray, keep: int,
                     inner: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Ranking scores of the candidates of an ensemble with a pre-filter, float32
    (docs/model-format.md, Members; the pre-filter contract).

    q: the pre-filter's float32 prediction per candidate; aten: bool per candidate
    (is_aten_template); inner(idx): the float32 scores of the candidates `idx` (ascending
    indices: the set P of prefilter_set, in candidate order) as the ensemble scores that
    candidate list alone (cascade_scores over P). Outside P a score is
    float32(float64(q) + PREFILTER_OFFSET): after every candidate of P, in the pre-filter's
    order. The C++ ranker (MlpInfer::score) computes the same bits."""
    import numpy as np

    q = np.asarray(q, dtype=np.float32)
    idx = np.flatnonzero(prefilter_set(q, aten, keep))
    scores = (q.astype(np.float64) + PREFILTER_OFFSET).astype(np.float32)
    scores[idx] = np.asarray(inner(idx), dtype=np.float32)
    return scores


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


MAX_ATEN_MARGIN = 1.0  # a Triton config predicted 2x faster than ATen: beyond that, no margin means anything


PROVENANCE_LISTS = ("torch_versions", "triton_versions")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def parse_provenance(prov: Any) -> dict[str, Any] | None:
    """model.json provenance, strictly: absent -> None; otherwise an object whose
    `torch_versions` / `triton_versions` (each optional) are arrays of strings and whose
    `templates` (optional) maps a template family ("mm", "bmm", ...) to an array of sha256
    hex strings (collect/fingerprint.template_hash). Other keys are ignored."""
    if prov is None:
        return None
    if not isinstance(prov, dict):
        _fail("model.json provenance", f"expected an object, got {prov!r:.200}")
    out: dict[str, Any] = {}
    for key in PROVENANCE_LISTS:
        if key in prov:
            v = prov[key]
            if not isinstance(v, list) or len(v) > 1024 or not all(isinstance(x, str) and len(x) <= 256 for x in v):
                _fail(f"model.json provenance.{key}", f"expected an array of strings, got {v!r:.200}")
            out[key] = list(v)
    if "templates" in prov:
        t = prov["templates"]
        if not isinstance(t, dict) or len(t) > 64:
            _fail("model.json provenance.templates", f"expected an object, got {t!r:.200}")
        out["templates"] = {}
        for fam, hashes in t.items():
            if (not isinstance(hashes, list) or len(hashes) > 1024
                    or not all(isinstance(h, str) and _SHA256_HEX.fullmatch(h) for h in hashes)):
                _fail(f"model.json provenance.templates.{fam}",
                      f"expected an array of sha256 hex strings, got {hashes!r:.200}")
            out["templates"][fam] = list(hashes)
    return out


def parse_selection(selection: Any) -> float | None:
    """model.json selection.aten_margin, strictly: absent -> None; otherwise a finite number
    in [0, MAX_ATEN_MARGIN]. `selection` is written by the release after training (the margin
    is a decision taken on the model's validation split), not by diode-train."""
    if selection is None:
        return None
    if not isinstance(selection, dict):
        _fail("model.json selection", f"expected an object, got {selection!r:.200}")
    if "aten_margin" not in selection:
        return None
    v = selection["aten_margin"]
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
            or not 0 <= v <= MAX_ATEN_MARGIN):
        _fail("model.json selection.aten_margin", f"expected a number in [0, {MAX_ATEN_MARGIN:g}], got {v!r:.100}")
    return float(v)


SELECTION_RULES = ("mean", "every_member")   # predict mode's ATen rules (hook/ranking.ATEN_RULES is this)


def parse_selection_rule(selection: Any) -> str | None:
    """model.json selection.aten_rule, strictly: absent (or no selection) -> None; otherwise
    one of SELECTION_RULES. `selection` itself is checked by parse_selection."""
    if not isinstance(selection, dict) or "aten_rule" not in selection:
        return None
    v = selection["aten_rule"]
    if v not in SELECTION_RULES:
        _fail("model.json selection.aten_rule", f"expected one of {SELECTION_RULES}, got {v!r:.100}")
    return v


PREFILTER_KEYS = {"hidden": (1, MAX_HIDDEN), "blocks": (0, MAX_BLOCKS), "keep": (1, MAX_KEEP)}


def _prefilter_field(arch: dict) -> Prefilter:
    """architecture.prefilter (present), strictly: exactly the keys hidden, blocks, keep, each
    an integer (not a bool) in its range."""
    where = "model.json architecture.prefilter"
    pf = arch["prefilter"]
    if not isinstance(pf, dict) or set(pf) != set(PREFILTER_KEYS):
        _fail(where, f"expected an object with exactly the integer keys {list(PREFILTER_KEYS)}, got {pf!r:.200}")
    out = {}
    for key, (lo, hi) in PREFILTER_KEYS.items():
        v = pf[key]
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            _fail(f"{where}.{key}", f"expected an integer in [{lo}, {hi}], got {v!r:.100}")
        out[key] = v
    return Prefilter(**out)


def _ensemble_fields(arch: dict) -> dict:
    """architecture.members (absent: 1), architecture.cascade (required with more than one
    member, absent with one) and architecture.prefilter (optional with more than one member,
    absent with one), strictly."""
    members = _int_field(arch, "members", 1, MAX_MEMBERS) if "members" in arch else 1
    if members == 1:
        if "cascade" in arch:
            _fail("model.json architecture.cascade", "must be absent when architecture.members is 1 (or absent)")
        if "prefilter" in arch:
            _fail("model.json architecture.prefilter",
                  "must be absent when architecture.members is 1 (or absent): a pre-filter is an ensemble's")
        return {"members": 1, "cascade": None, "prefilter": None}
    if "cascade" not in arch:
        _fail("model.json architecture.cascade", f"required when architecture.members is {members} (> 1)")
    return {"members": members, "cascade": _int_field(arch, "cascade", 1, MAX_CASCADE),
            "prefilter": _prefilter_field(arch) if "prefilter" in arch else None}


def parse_model_json(text: bytes, path: str = "<memory>") \
        -> tuple[Architecture, FeatureSpec, dict[str, tuple[int, int]] | None, float | None, str | None, dict]:
    """Checks model.json; returns its architecture, feature spec, dataset domain, ATen margin
    and rule (selection.aten_margin and selection.aten_rule, None where absent) and the parsed
    object."""
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
        **_ensemble_fields(arch),
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
    aten_margin = parse_selection(j.get("selection"))  # the same
    aten_rule = parse_selection_rule(j.get("selection"))  # the same
    return a, spec, domain, aten_margin, aten_rule, j


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


def build_members(arch: Architecture, tensors: dict[str, tuple[tuple[int, ...], bytes]]) -> list:
    """Every member's module, in member order (one for a single model)."""
    if arch.members == 1:
        return [build_module(arch, tensors)]
    return [build_module(arch, tensors, member_prefix(j)) for j in range(arch.members)]


def build_prefilter(arch: Architecture, tensors: dict[str, tuple[tuple[int, ...], bytes]]):
    """The pre-filter's module (tensors `prefilter.*`), or None without one."""
    if arch.prefilter is None:
        return None
    import dataclasses
    pf = dataclasses.replace(arch, hidden=arch.prefilter.hidden, blocks=arch.prefilter.blocks,
                             members=1, cascade=None, prefilter=None)
    return build_module(pf, tensors, PREFILTER_PREFIX)


def build_module(arch: Architecture, tensors: dict[str, tuple[tuple[int, ...], bytes]], prefix: str = ""):
    """The residual MLP of docs/model-format.md, weights copied from the tensors of `tensors`
    named `prefix` + a residual_mlp name (an ensemble member's: member_prefix(j))."""
    import torch

    from .hook._mlp import ResidualMLP

    module = ResidualMLP(arch.input, arch.hidden, arch.blocks, arch.activation)
    state = {}
    for name in arch.member_shapes():
        shape, blob = tensors[prefix + name]
        buf = bytearray(blob)
        if sys.byteorder != "little":  # the format is little-endian; swap on big-endian hosts
            a = array.array("f")
            a.frombytes(bytes(buf))
            a.byteswap()
            buf = bytearray(a.tobytes())
        t = torch.frombuffer(buf, dtype=torch.float32).reshape(shape)
        if not bool(torch.isfinite(t).all()):
            _fail(f"weights.msgpack tensor '{prefix}{name}'", "contains a non-finite value")
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
    arch, spec, domain, aten_margin, aten_rule, j = parse_model_json(text, mj)
    tensors = parse_weights(data, arch)
    h = hashlib.sha256()
    h.update(len(text).to_bytes(8, "little") + text)
    h.update(data)
    meta = {k: j[k] for k in ("dataset", "metrics", "training", "selection", "provenance") if k in j}
    info = ModelInfo(path=os.path.abspath(path), hardware_key=j["hardware_key"], architecture=arch,
                     feature_spec=spec, target=j["target"], model_id=h.hexdigest(), meta=meta,
                     domain=domain, aten_margin=aten_margin, aten_rule=aten_rule,
                     provenance=parse_provenance(j.get("provenance")))
    return info, tensors


@dataclass
class LoadedModel:
    info: ModelInfo
    module: Any  # hook._mlp.ResidualMLP: the model's, or an ensemble's member 0 (scores every config)
    # Where the hook found it (hook/sources.py: "explicit", "env", "hub", "cache", "package")
    # and the signed bundle version; None for a model loaded directly.
    source: str | None = None
    bundle_version: int | None = None
    # An ensemble's members 1..N-1 (architecture.members = N > 1), in member order: they score
    # only the cascade set (cascade_scores). Empty for a single model.
    others: tuple = ()
    # The same members as one hook._mlp.StackedMLP (forward -> [N - 1, rows]): what the
    # rankers run, one batched call per layer instead of one forward per member. None
    # for a single model.
    stacked_others: Any = None
    # An ensemble's pre-filter (architecture.prefilter), a hook._mlp.ResidualMLP scoring every
    # config before member 0 (prefilter_scores); None without one (then nothing changes).
    prefilter: Any = None
    # Template families ("mm", "bmm") whose Inductor template source changed since the
    # model's data was collected: the hook passes their GEMMs through (hook/staleness.py sets
    # it at install). None: not checked yet.
    stale_families: frozenset | None = None

    @property
    def cascade(self) -> int | None:
        return self.info.architecture.cascade

    @property
    def keep(self) -> int | None:
        """architecture.prefilter.keep: how many configs the pre-filter hands on (None: no pre-filter)."""
        pf = self.info.architecture.prefilter
        return None if pf is None else pf.keep

    def run_others(self, x):
        """Members 1..N-1 on feature rows x: [N - 1, rows] (stacked_others; a model built
        by hand with `others` only stacks their forwards)."""
        if self.stacked_others is not None:
            return self.stacked_others(x)
        import torch
        return torch.stack([m(x) for m in self.others])


def load_model_dir(path: str | os.PathLike) -> LoadedModel:
    """Reads, validates and builds a model directory. Raises ModelFormatError."""
    info, tensors = read_model_dir(path)
    first, *others = build_members(info.architecture, tensors)
    stacked = None
    if others:
        from .hook._mlp import StackedMLP
        stacked = StackedMLP(others).eval()
    return LoadedModel(info=info, module=first, others=tuple(others), stacked_others=stacked,
                       prefilter=build_prefilter(info.architecture, tensors))
