"""The shard spec: what one collector run measures (JSON, documented in docs/collector.md).

{
  "shard_id": "sweep1/h100/0007",          # wire shard id rules
  "sweep_id": "sweep1",
  "search_space": "EXHAUSTIVE",              # or "DEFAULT" (Inductor's max_autotune_gemm_search_space)
  "problems": [ {wire.Problem JSON form}, ... ],
  "timing": {"warmup": 5, "repeats": 20, "min_repeats": 5, "l2_flush": true,
             "config_timeout_s": 5.0, "compile_timeout_s": 600, "budget_ms_per_config": 60.0,
             "problem_timeout_s": 900, "static_top": 10,
             "model_top": 0, "model": ""},    # 2.6.0: a model's top picks join the static targets
  "tf32": [false, true],                     # float32 problems are measured once per mode
  "smem_prefilter": true,
  "producer": {"name": "host/gpu0", "public_key": ""}
}
Unknown keys are errors (a typo must not silently change a sweep).

A scaled_mm problem (FP8 torch._scaled_mm) is written
  {"op": "scaled_mm", "m": M, "n": N, "k": K, "dtype_a": "float8_e4m3fn", "scale": "tensor" | "row"}
dtype_b defaults to dtype_a, dtype_out to "bfloat16" and trans_b to true (b column-major, as
cuBLASLt requires); the collector measures exactly that form (SCALED_MM_FORM).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from .. import wire

SEARCH_SPACES = ("EXHAUSTIVE", "DEFAULT")
# The one scaled_mm form the collector measures (problems.make_inputs builds it): FP8 e4m3
# operands, a row-major and b column-major, bfloat16 output, one scale kind of wire.SCALES.
SCALED_MM_FORM = {"dtype_a": "float8_e4m3fn", "dtype_b": "float8_e4m3fn", "dtype_out": "bfloat16",
                  "trans_a": False, "trans_b": True, "bias": "none", "alpha": 1.0, "beta": 1.0, "batch": 1}


class SpecError(ValueError):
    """Invalid shard spec; the message names the offending field."""


@dataclass(frozen=True)
class Timing:
    warmup: int = 5
    repeats: int = 20
    min_repeats: int = 5
    l2_flush: bool = True
    config_timeout_s: float = 5.0      # one launch slower than this -> status timeout
    compile_timeout_s: int = 600       # Inductor's precompilation_timeout_seconds
    budget_ms_per_config: float = 60.0  # cap on GPU time spent timing one config
    problem_timeout_s: float = 900.0   # after this, a problem's untimed configs -> status timeout
    # The fastest Triton configs (and DEFAULT's fastest) re-timed as static-shape kernels,
    # the problem's sizes as literals as Inductor compiles them (engine.retime_static); 0: off.
    static_top: int = 10
    # The `model_top` configs a model (`model`: a model or bundle directory, e.g. the shipped
    # one) predicts fastest among the ok Triton entries also join the static targets
    # (collector 2.6.0), so a model's likely picks get a record of the kernel Inductor would
    # compile (bench/static_pick_split.py: a pick with a runtime-size record only is read ~10%
    # slow); 0: off.
    model_top: int = 0
    model: str = ""
    # Further model directories whose top `model_top` picks join too (the union, `model`'s
    # first). For the publish gate: records re-collected with one model's picks favour it
    # against a candidate whose picks were not timed as compiled, so a re-collection that
    # judges a candidate against the shipped model times both models' picks (docs/collector.md).
    extra_models: tuple[str, ...] = ()


@dataclass(frozen=True)
class Spec:
    shard_id: str
    sweep_id: str
    problems: tuple[wire.Problem, ...]
    search_space: str = "EXHAUSTIVE"
    timing: Timing = field(default_factory=Timing)
    tf32: tuple[bool, ...] = (False, True)
    smem_prefilter: bool = True
    producer_name: str = "collector"
    producer_key: str = ""


def _check_keys(d: dict, allowed: set[str], path: str) -> None:
    if not isinstance(d, dict):
        raise SpecError(f"{path}: expected an object, got {type(d).__name__}")
    extra = sorted(set(d) - allowed)
    if extra:
        raise SpecError(f"{path}: unknown field(s) {', '.join(extra)}")


def _typed(d: dict, key: str, typ, default, path: str):
    if key not in d:
        return default
    v = d[key]
    ok = isinstance(v, typ) and not (typ in (int, (int, float)) and isinstance(v, bool))
    if not ok:
        want = typ.__name__ if isinstance(typ, type) else "number"
        raise SpecError(f"{path}.{key}: expected {want}, got {type(v).__name__}")
    return v


def _timing(d: dict, path: str) -> Timing:
    allowed = set(Timing.__dataclass_fields__)
    _check_keys(d, allowed, path)
    t = Timing(
        warmup=_typed(d, "warmup", int, Timing.warmup, path),
        repeats=_typed(d, "repeats", int, Timing.repeats, path),
        min_repeats=_typed(d, "min_repeats", int, Timing.min_repeats, path),
        l2_flush=_typed(d, "l2_flush", bool, Timing.l2_flush, path),
        config_timeout_s=float(_typed(d, "config_timeout_s", (int, float), Timing.config_timeout_s, path)),
        compile_timeout_s=_typed(d, "compile_timeout_s", int, Timing.compile_timeout_s, path),
        budget_ms_per_config=float(_typed(d, "budget_ms_per_config", (int, float),
                                          Timing.budget_ms_per_config, path)),
        problem_timeout_s=float(_typed(d, "problem_timeout_s", (int, float), Timing.problem_timeout_s, path)),
        static_top=_typed(d, "static_top", int, Timing.static_top, path),
        model_top=_typed(d, "model_top", int, Timing.model_top, path),
        model=_typed(d, "model", str, Timing.model, path),
        extra_models=_str_list(d, "extra_models", path),
    )
    if not 0 <= t.warmup <= 1000:
        raise SpecError(f"{path}.warmup: {t.warmup} out of range [0, 1000]")
    if not 1 <= t.repeats <= 10000:
        raise SpecError(f"{path}.repeats: {t.repeats} out of range [1, 10000]")
    if not 1 <= t.min_repeats <= t.repeats:
        raise SpecError(f"{path}.min_repeats: must be in [1, repeats={t.repeats}]")
    if not t.config_timeout_s > 0:
        raise SpecError(f"{path}.config_timeout_s: must be > 0")
    if t.compile_timeout_s <= 0:
        raise SpecError(f"{path}.compile_timeout_s: must be > 0")
    if not t.problem_timeout_s > 0:
        raise SpecError(f"{path}.problem_timeout_s: must be > 0")
    if not t.budget_ms_per_config > 0:
        raise SpecError(f"{path}.budget_ms_per_config: must be > 0")
    if not 0 <= t.static_top <= 100:
        raise SpecError(f"{path}.static_top: {t.static_top} out of range [0, 100]")
    if not 0 <= t.model_top <= 20:
        raise SpecError(f"{path}.model_top: {t.model_top} out of range [0, 20]")
    if t.model_top and not t.static_top:
        raise SpecError(f"{path}.model_top: needs the static stage (static_top > 0)")
    if bool(t.model_top) != bool(t.model):
        raise SpecError(f"{path}.model_top and {path}.model: give both (a model directory and how many of "
                        f"its top picks) or neither")
    if t.extra_models and not t.model:
        raise SpecError(f"{path}.extra_models: needs model and model_top")
    if len(t.extra_models) > MAX_EXTRA_MODELS:
        raise SpecError(f"{path}.extra_models: {len(t.extra_models)} models, at most {MAX_EXTRA_MODELS}")
    if any(not m for m in t.extra_models) or len({t.model, *t.extra_models}) != 1 + len(t.extra_models):
        raise SpecError(f"{path}.extra_models: empty or repeated model directory")
    return t


MAX_EXTRA_MODELS = 3  # each model adds up to model_top static kernels per problem


def _str_list(d: dict, key: str, path: str) -> tuple[str, ...]:
    v = d.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise SpecError(f"{path}.{key}: expected a list of strings")
    return tuple(v)


def _problem(d, path: str) -> wire.Problem:
    _check_keys(d, set(wire.Problem.__dataclass_fields__), path)
    missing = [k for k in ("op", "m", "n", "k", "dtype_a") if k not in d]
    if missing:
        raise SpecError(f"{path}: missing field(s) {', '.join(missing)}")
    d = dict(d)
    scaled = d["op"] == "scaled_mm"
    if scaled and "scale" not in d:
        raise SpecError(f"{path}: missing field scale (scaled_mm: tensor or row)")
    # Convenience defaults: one dtype for all three, batch 1, bias "row" for the bias ops;
    # scaled_mm: bfloat16 output and b column-major.
    d.setdefault("dtype_b", d["dtype_a"])
    d.setdefault("dtype_out", "bfloat16" if scaled else d["dtype_a"])
    d.setdefault("bias", "row" if d["op"] in ("addmm", "baddbmm") else "none")
    if scaled:
        d.setdefault("trans_b", True)
    for key in ("trans_a", "trans_b"):
        if key in d and not isinstance(d[key], bool):
            raise SpecError(f"{path}.{key}: expected boolean, got {type(d[key]).__name__}")
    for key in ("op", "dtype_a", "dtype_b", "dtype_out", "bias", "scale"):
        if key in d and not isinstance(d[key], str):
            raise SpecError(f"{path}.{key}: expected string, got {type(d[key]).__name__}")
    for key in ("batch", "m", "n", "k"):
        if key in d and (isinstance(d[key], bool) or not isinstance(d[key], int)):
            raise SpecError(f"{path}.{key}: expected integer, got {type(d[key]).__name__}")
    for key in ("alpha", "beta"):
        if key in d:
            if isinstance(d[key], bool) or not isinstance(d[key], (int, float)):
                raise SpecError(f"{path}.{key}: expected number")
            d[key] = float(d[key])
    try:
        p = wire.validate_problem(wire.Problem(**d), path)
    except wire.WireError as e:
        raise SpecError(str(e)) from None
    if p.op == "scaled_mm":
        for key, want in SCALED_MM_FORM.items():
            if getattr(p, key) != want:
                raise SpecError(f"{path}.{key}: scaled_mm is collected with {key} {json.dumps(want)} only, "
                                f"got {json.dumps(getattr(p, key))}")
    elif not (p.dtype_a == p.dtype_b == p.dtype_out):
        raise SpecError(f"{path}: mixed dtypes are not collected (dtype_a, dtype_b, dtype_out differ)")
    for key in ("m", "n", "k"):
        if not 1 <= getattr(p, key) <= wire.MAX_DIM:
            raise SpecError(f"{path}.{key}: out of range [1, 2^31]")
    if not 1 <= p.batch <= 1 << 20:
        raise SpecError(f"{path}.batch: out of range [1, 2^20]")
    return p


def parse_spec(d) -> Spec:
    allowed = {"shard_id", "sweep_id", "problems", "search_space", "timing", "tf32",
               "smem_prefilter", "producer"}
    _check_keys(d, allowed, "spec")
    for key in ("shard_id", "problems"):
        if key not in d:
            raise SpecError(f"spec: missing field {key}")
    sid = _typed(d, "shard_id", str, "", "spec")
    if not wire._SHARD_ID.match(sid):
        raise SpecError("spec.shard_id: must match [A-Za-z0-9._:/-]{1,128}")
    sweep = _typed(d, "sweep_id", str, "", "spec")
    if len(sweep.encode()) > 128:
        raise SpecError("spec.sweep_id: longer than 128 bytes")
    probs = _typed(d, "problems", list, [], "spec")
    if not probs:
        raise SpecError("spec.problems: empty (nothing to collect)")
    if len(probs) > wire.MAX_PROBLEMS:
        raise SpecError(f"spec.problems: more than {wire.MAX_PROBLEMS}")
    problems = tuple(_problem(p, f"spec.problems[{i}]") for i, p in enumerate(probs))
    # Any case, as the hook's install(search_space=...) takes it; stored as Inductor spells it.
    space = _typed(d, "search_space", str, "EXHAUSTIVE", "spec").upper()
    if space not in SEARCH_SPACES:
        raise SpecError(f"spec.search_space: '{space}' is not one of {', '.join(SEARCH_SPACES)}")
    tf32 = _typed(d, "tf32", list, [False, True], "spec")
    if not tf32 or not all(isinstance(x, bool) for x in tf32) or len(set(tf32)) != len(tf32):
        raise SpecError("spec.tf32: expected a non-empty list of distinct booleans")
    prod = _typed(d, "producer", dict, {}, "spec")
    _check_keys(prod, {"name", "public_key"}, "spec.producer")
    name = _typed(prod, "name", str, "collector", "spec.producer")
    key = _typed(prod, "public_key", str, "", "spec.producer")
    if not name or len(name.encode()) > 256 or len(key.encode()) > 256:
        raise SpecError("spec.producer: name must be 1..256 bytes, public_key <= 256 bytes")
    return Spec(sid, sweep, problems, space, _timing(_typed(d, "timing", dict, {}, "spec"), "spec.timing"),
                tuple(tf32), _typed(d, "smem_prefilter", bool, True, "spec"), name, key)


def load_spec(path: str) -> Spec:
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as e:
        raise SpecError(f"cannot read spec {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise SpecError(f"spec {path} is not valid JSON: {e}") from None
    return parse_spec(raw)


def _timing_to_json(t: Timing) -> dict:
    d = dict(t.__dict__)
    if t.extra_models:
        d["extra_models"] = list(t.extra_models)
    else:
        del d["extra_models"]  # specs without it read as before
    return d


def spec_to_json(s: Spec) -> dict:
    return {"shard_id": s.shard_id, "sweep_id": s.sweep_id, "search_space": s.search_space,
            "problems": [wire.to_json(p) for p in s.problems],
            "timing": _timing_to_json(s.timing), "tf32": list(s.tf32),
            "smem_prefilter": s.smem_prefilter,
            "producer": {"name": s.producer_name, "public_key": s.producer_key}}


def add_model_top_arguments(ap) -> None:
    """--model-top N --model DIR for a tool that writes a spec (respec, sample): collector
    2.6.0's timing.model_top and timing.model, checked by model_top_timing."""
    ap.add_argument("--model-top", type=int, default=0, metavar="N",
                    help="also time the N configs --model predicts fastest as static kernels "
                         "(spec timing.model_top; 0: off)")
    ap.add_argument("--model", default="",
                    help="model or bundle directory for --model-top, as the collector will see it")
    ap.add_argument("--also-model", action="append", default=[], metavar="DIR",
                    help="another model whose top --model-top picks are timed too (repeatable; spec "
                         "timing.extra_models): a candidate beside the shipped --model, for a fair publish gate")


def finish_spec(spec: dict, args) -> dict:
    """A spec dict a tool (respec, sample) is about to write, completed with the `timing` block
    of its add_model_top_arguments options and checked to load (parse_spec); SpecError (a
    ValueError) otherwise. Returns `spec`."""
    timing = model_top_timing(args.model_top, args.model, args.also_model)
    if timing:
        spec["timing"] = timing
    parse_spec(spec)  # what we write must load
    return spec


def model_top_timing(model_top: int, model: str, also: list[str] | tuple[str, ...] = ()) -> dict | None:
    """The spec's `timing` block for --model-top/--model/--also-model, or None when none is
    given. SpecError for a model directory without model.json; parse_spec checks the rest
    (both or neither, the range, --also-model only with --model)."""
    if not model_top and not model and not also:
        return None
    for flag, d in [("--model", model)] * bool(model) + [("--also-model", m) for m in also]:
        if not os.path.isfile(os.path.join(d, "model.json")):
            raise SpecError(f"{flag} {d}: no model.json there")
    timing = {"model_top": model_top, "model": model}
    if also:
        timing["extra_models"] = list(also)
    return timing
