"""Python's definitions agree with shared/schema/contracts.json (issue 54, "One schema").

tests/cpp/test_schema.cpp checks the C++ side against the same file, so a change to
either language that is not also made in the schema (and so in the other language)
fails here or there. Checked: the field names and order the encoders write (a sample
of every kind is encoded and each msgpack array position compared with the JSON form's
value of the schema's field name), the decoders' per-field limits, the enums, the
message limits, the record flag bits, the feature names and the hardware-key rule.
"""
from __future__ import annotations

import json
import math
import pathlib
import re

import msgpack
import pytest

from torch_diode import features, hardware, wire
from torch_diode.collect import engine
from torch_diode.wire import (CollectionMethod, HardwareId, KernelConfig, Problem, Producer, Shard,
                              ShardRecord, TimingRecord)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "shared/schema/contracts.json").read_text())
WIRE = SCHEMA["wire"]
TYPES = WIRE["types"]


# ------------------------------------------------------------------ samples

def sample_problem() -> Problem:
    return Problem("addmm", 1, 1000, 2000, 3000, "bfloat16", "float16", "float32", True, False, "row", 0.5, 2.0)


def sample_problem_v3() -> Problem:
    return Problem("scaled_mm", 1, 4096, 1024, 2048, "float8_e4m3fn", "float8_e4m3fn", "bfloat16", False, True,
                   "none", 1.0, 1.0, "row")


def sample_config() -> KernelConfig:
    return KernelConfig("triton::mm", 64, 128, 32, 8, 3, 4, True, False, True, "float32",
                        (("NUM_SMS", 132), ("k_split", -2)))


def sample_record() -> TimingRecord:
    return TimingRecord(sample_problem(), sample_config(), 12.5, 0.25, 17, "ok", 0b1010)


def sample_hardware() -> HardwareId:
    return HardwareId("nvidia", "NVIDIA H100 80GB HBM3", "sm_90", "9.0", 132, 85523536281, "580.1",
                      "cuda 13.0", "2.11.0", "3.6.0")


def sample_record_v3() -> TimingRecord:
    return TimingRecord(sample_problem_v3(), sample_config(), 12.5, 0.25, 17, "ok", 0b1010)


def sample_shard(version: int = 2) -> Shard:
    s = Shard("shard-1", "sweep-1", sample_hardware(), Producer("host/gpu0", "key", "inductor", "diode 0.1.0"),
              1764000000000, [sample_problem(), Problem()],
              [ShardRecord(1, sample_config(), 3.0, 0.5, 9, "ok", 2), ShardRecord(0, KernelConfig("aten"), 0.0, 0.0, 0,
                                                                                   "timeout", 0)],
              wire_version=version)
    if version >= 2:
        s.method = CollectionMethod("cuda-events", "torch_diode.collect 2.6.0")
        s.problem_wall_s = (1.5, 2.25)
    if version == 3:
        s.problems[1] = sample_problem_v3()
        s.templates = (("triton::mm", "a" * 64), ("triton::scaled_mm", "0" * 64))
    return wire.seal(s)


SAMPLES = {"hardware": sample_hardware, "problem": sample_problem, "config": sample_config,
           "record": sample_record, "shard": sample_shard, "problem_v3": sample_problem_v3,
           "record_v3": sample_record_v3, "shard_v3": lambda: sample_shard(3)}
# The JSON form leaves out a problem's scale "none" and a shard's empty templates.
OMITTED = {"scale": "none", "templates": []}


def kind_of(sample: str) -> str:
    return sample.split("_")[0]


def version_of(sample: str) -> int:
    return WIRE["version"] if sample.endswith("_v3") else WIRE["base_version"]


def fields(type_name: str, version: int = WIRE["version"]) -> list[dict]:
    return [f for f in TYPES[type_name] if f.get("since", 0) <= version]


# ------------------------------------------------------------------ field order

def check_matches(value, form, type_name: str, path: str, version: int) -> None:
    """`value` is a decoded msgpack item of a message of wire `version`, `form` the JSON
    form of the same thing."""
    if type_name in TYPES:
        fs = fields(type_name, version)
        if type_name == "shard":
            assert form["wire_version"] == version, path
        assert isinstance(value, list) and len(value) == len(fs), f"{path}: {value!r}"
        for item, f in zip(value, fs):
            sub = form[f["name"]] if f["name"] in form else OMITTED[f["name"]]
            check_matches(item, sub, f["type"], f"{path}.{f['name']}", version)
    elif type_name.startswith("array<"):
        inner = type_name[len("array<"):-1]
        assert isinstance(value, list) and len(value) == len(form), path
        for i, (item, sub) in enumerate(zip(value, form)):
            check_matches(item, sub, inner, f"{path}[{i}]", version)
    elif type_name == "bin32":
        assert isinstance(value, bytes) and len(value) == 32 and value.hex() == form, path
    elif type_name == "extra":
        assert isinstance(value, dict) and value == form, path
        assert list(value) == sorted(value, key=str.encode), path
    elif type_name == "float64":
        assert type(value) is float and value == form, path
    elif type_name == "uint":
        assert type(value) is int and value >= 0 and value == form, path
    elif type_name == "bool":
        assert type(value) is bool and value == form, path
    elif type_name == "str":
        assert type(value) is str and value == form, path
    else:
        pytest.fail(f"{path}: unknown schema type {type_name}")


def test_schema_types_are_closed():
    known = set(TYPES) | {"str", "uint", "bool", "float64", "extra", "bin32"}
    for name, fs in TYPES.items():
        assert len({f["name"] for f in fs}) == len(fs), name
        for f in fs:
            t = f["type"]
            assert (t[len("array<"):-1] if t.startswith("array<") else t) in known, (name, f)
            if "enum" in f:
                assert f["enum"] in WIRE["enums"]
    assert set(WIRE["envelope"]["kinds"]) == set(wire._READERS)


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_encoder_writes_the_schema_fields_in_order(sample):
    value = SAMPLES[sample]()
    kind, version = kind_of(sample), version_of(sample)
    top = msgpack.unpackb(wire.encode(value), raw=False)
    env = WIRE["envelope"]
    assert len(top) == len(env["fields"])
    assert top[:3] == [env["magic"], version, kind]
    check_matches(top[3], wire.to_json(value), WIRE["envelope"]["kinds"][kind], kind, version)
    assert wire.decode(wire.encode(value), kind) == value


def test_version_1_shard_layout():
    value = sample_shard(1)
    top = msgpack.unpackb(wire.encode(value), raw=False)
    assert top[1] == WIRE["min_version"] == 1
    check_matches(top[3], wire.to_json(value), "shard", "shard", 1)
    assert len(top[3]) == len(fields("shard", 1))


def test_json_form_has_the_schema_fields():
    # The JSON form (to_json / *_from_json) names exactly the schema's fields, less a
    # problem's scale "none" and a shard's empty templates.
    for kind, type_name in (("hardware", "hardware"), ("problem", "problem"), ("config", "config"),
                            ("problem_v3", "problem")):
        names = [f["name"] for f in TYPES[type_name]]
        if kind == "problem":
            names.remove("scale")
        assert list(wire.to_json(SAMPLES[kind]())) == names
    assert set(wire.to_json(sample_record())) == {f["name"] for f in TYPES["record"]}
    assert set(wire.to_json(sample_shard())) == {f["name"] for f in TYPES["shard"]} - {"templates"} | {"wire_version"}
    assert set(wire.to_json(sample_shard(3))) == {f["name"] for f in TYPES["shard"]} | {"wire_version"}
    loaders = {"hardware": wire.hardware_from_json, "problem": wire.problem_from_json,
               "config": wire.config_from_json, "record": wire.record_from_json, "shard": wire.shard_from_json}
    for sample in SAMPLES:
        value = SAMPLES[sample]()
        assert loaders[kind_of(sample)](wire.to_json(value)) == value


# ------------------------------------------------------------------ limits

def _set(body: list, type_name: str, path: list[str], new, version: int = WIRE["base_version"]) -> list:
    """A copy of the msgpack body (of wire `version`) with the field at `path` (schema names) set to `new`."""
    body = list(body)
    fs = fields(type_name, version)
    i = [f["name"] for f in fs].index(path[0])
    if len(path) == 1:
        body[i] = new
    else:
        body[i] = _set(body[i], fs[i]["type"], path[1:], new, version)
    return body


def _limit_cases():
    """(sample, field path, field) for every ranged or length-limited field of the
    standalone kinds, in each version (the shard's own fields need a hash, see the shard test)."""
    for sample in ("hardware", "problem", "config", "record", "problem_v3", "record_v3"):
        stack = [([], kind_of(sample))]
        while stack:
            prefix, tn = stack.pop()
            for f in fields(tn, version_of(sample)):
                if f["type"] in TYPES:
                    stack.append((prefix + [f["name"]], f["type"]))
                elif "range" in f or "max_bytes" in f:
                    yield sample, prefix + [f["name"]], f


LIMIT_CASES = list(_limit_cases())


def _decode_body(kind: str, body, version: int = WIRE["base_version"]) -> None:
    wire.decode(msgpack.packb(["diode", version, kind, body], use_bin_type=True), kind)


@pytest.mark.parametrize("sample,path,f", LIMIT_CASES, ids=[f"{k}.{'.'.join(p)}" for k, p, _ in LIMIT_CASES])
def test_decoder_enforces_the_schema_limits(sample, path, f):
    kind, version = kind_of(sample), version_of(sample)
    body = msgpack.unpackb(wire.encode(SAMPLES[sample]()), raw=False)[3]
    where = ".".join([kind] + path)
    if "range" in f:
        lo, hi = f["range"]
        bad = [v for v in (lo - 1, hi + 1) if 0 <= v < 1 << 64]
        for v in bad:
            with pytest.raises(wire.WireError) as e:
                _decode_body(kind, _set(body, kind, path, v, version), version)
            assert str(e.value) == f"{where}: {v} out of range [{lo}, {hi}]"
    if "max_bytes" in f:
        with pytest.raises(wire.WireError) as e:
            _decode_body(kind, _set(body, kind, path, "x" * (f["max_bytes"] + 1), version), version)
        assert str(e.value) == f"{where}: string longer than {f['max_bytes']} bytes"


def test_ranges_cover_the_limited_fields():
    # Every uint field states its range, so the loop above reaches each.
    for name, fs in TYPES.items():
        for f in fs:
            if f["type"] == "uint":
                assert "range" in f, (name, f["name"])
    assert len(LIMIT_CASES) >= 30
    assert any(p == ["scale"] for _, p, _ in LIMIT_CASES)


def test_shard_id_regex_and_lengths():
    (sid,) = [f for f in TYPES["shard"] if f["name"] == "id"]
    assert wire._SHARD_ID.pattern == sid["regex"]
    (sweep,) = [f for f in TYPES["shard"] if f["name"] == "sweep_id"]
    s = sample_shard()
    s.sweep_id = "s" * (sweep["max_bytes"] + 1)
    body = msgpack.unpackb(wire.encode(wire.seal(s)), raw=False)
    with pytest.raises(wire.WireError, match=rf"^shard.sweep_id: string longer than {sweep['max_bytes']} bytes"):
        wire.decode(msgpack.packb(body, use_bin_type=True), "shard")


def test_enums_and_message_limits():
    e = WIRE["enums"]
    assert list(wire.OPS) == e["op"]
    assert list(wire.DTYPES) == e["dtype"]
    assert list(wire.BIASES) == e["bias"]
    assert list(wire.STATUSES) == e["status"]
    assert list(wire.RUNNERS) == e["runner"]
    assert list(wire.SCALES) == e["scale"] == ["none", "tensor", "row"]
    assert e["op"][-1] == "scaled_mm" and e["dtype"][-1] == "float8_e4m3fn"
    lim = WIRE["limits"]
    assert wire.MAX_VERSION == WIRE["version"] == 3 and wire.MIN_VERSION == WIRE["min_version"]
    assert wire.VERSION == WIRE["base_version"] == 2
    assert wire.MAX_TEMPLATES == lim["templates"]
    assert wire.MAX_MESSAGE_BYTES == lim["message_bytes"]
    assert wire.MAX_STRING == lim["string_bytes"]
    assert wire.MAX_PROBLEMS == lim["problems"]
    assert wire.MAX_RECORDS == lim["records"]
    assert wire.MAX_EXTRA == lim["extra_entries"]
    (m,) = [f for f in TYPES["problem"] if f["name"] == "m"]
    assert wire.MAX_DIM == m["range"][1]


def test_version_3_fields():
    assert TYPES["problem"][-1] == {"name": "scale", "type": "str", "enum": "scale", "since": 3, "max_bytes": 32}
    assert TYPES["shard"][-2] == {"name": "templates", "type": "array<template_source>", "since": 3}
    assert TYPES["shard"][-1]["name"] == "sha256"
    name, digest = TYPES["template_source"]
    assert (name["name"], name["max_bytes"]) == ("name", wire.MAX_TEMPLATE_NAME)
    assert (digest["name"], digest["regex"]) == ("sha256", wire._SHA256_HEX.pattern)
    # The hash covers every field but the last, in each version.
    for version in (1, 2, 3):
        assert [f["name"] for f in fields("shard", version)][-1] == "sha256"
        assert len(wire._shard_content(sample_shard(version))) == len(fields("shard", version)) - 1


def test_families():
    fam = SCHEMA["families"]
    base = SCHEMA["features"]["base_names"]
    assert fam == {"gemm": {"ops": ["mm", "addmm", "bmm", "baddbmm"], "features": "features.base_names"},
                   "scaled_mm": {"ops": ["scaled_mm"], "dtypes": ["float8_e4m3fn"], "scales": ["tensor", "row"],
                                 "features": base + ["scale_rowwise", "fast_accum"]}}
    assert {f: list(ops) for f, ops in wire.FAMILIES.items()} == {f: v["ops"] for f, v in fam.items()}
    listed = [op for v in fam.values() for op in v["ops"]]
    assert sorted(listed) == sorted(WIRE["enums"]["op"])
    for family, v in fam.items():
        for op in v["ops"]:
            assert wire.family_of(op) == family
    assert set(fam["scaled_mm"]["scales"]) | {"none"} == set(WIRE["enums"]["scale"])


def test_extra_limits():
    lim = WIRE["limits"]
    body = msgpack.unpackb(wire.encode(sample_config()), raw=False)[3]
    too_many = {f"k{i:02d}": i for i in range(lim["extra_entries"] + 1)}
    with pytest.raises(wire.WireError, match=rf"^config.extra: more than {lim['extra_entries']} entries"):
        _decode_body("config", _set(body, "config", ["extra"], too_many))
    with pytest.raises(wire.WireError, match=rf"^config.extra\[0\]: string longer than {lim['extra_key_bytes']}"):
        _decode_body("config", _set(body, "config", ["extra"], {"k" * (lim["extra_key_bytes"] + 1): 1}))


# ------------------------------------------------------------------ flags, features

def test_record_flag_bits():
    flags = SCHEMA["record_flags"]["flags"]
    assert len({f["bit"] for f in flags}) == len(flags)
    defined = {k: v for k, v in vars(wire).items() if k.startswith("FLAG_")}
    assert defined == {f["python"]: 1 << f["bit"] for f in flags}
    for f in flags:  # the collector uses the one definition, not a copy
        if hasattr(engine, f["python"]):
            assert getattr(engine, f["python"]) is getattr(wire, f["python"])
    assert not re.search(r"^FLAG_\w+\s*=", (ROOT / "python/torch_diode/collect/engine.py").read_text(), re.M)


def test_feature_names():
    fs = SCHEMA["features"]
    assert list(features.BASE_FEATURE_NAMES) == fs["base_names"]
    assert features.SPEC_VERSION == fs["spec_version"]
    spec = features.FeatureSpec()
    assert spec.templates == fs["default_templates"]
    assert spec.sm_count == fs["default_sm_count"]
    assert spec.names == fs["base_names"] + [fs["template_name_prefix"] + t for t in fs["default_templates"]]
    assert len(features.raw_features(spec, sample_problem(), sample_config())) == len(spec.names)
    golden = json.loads((ROOT / "tests/golden/features.json").read_text())
    assert golden["spec"]["names"][:len(fs["base_names"])] == fs["base_names"]


# ------------------------------------------------------------------ hardware key

HK = SCHEMA["hardware_key"]


def test_hardware_key_rule_constants():
    assert hardware.MAX_KEY == HK["max_len"]
    assert hardware._VALID_KEY.pattern == HK["regex"]
    assert hardware._MEMORY_TOKEN.pattern == HK["memory_token_regex"]


@pytest.mark.parametrize("ex", HK["examples"], ids=[e["key"] for e in HK["examples"]])
def test_hardware_key_examples(ex):
    h = HardwareId(ex["vendor"], ex["device_name"], memory_bytes=ex["memory_bytes"])
    assert hardware.hardware_key(h) == ex["key"]
    assert hardware.is_valid_hardware_key(ex["key"])
    gib = ex["memory_bytes"] / float(1 << 30)
    if gib > 0:
        rounded = int((gib + HK["memory_round_gib"] - 1e-6) / HK["memory_round_gib"]) * HK["memory_round_gib"]
        assert ex["key"].endswith(f"-{rounded}gb") or len(ex["key"]) >= HK["max_len"] - 1
        assert math.ceil(gib / HK["memory_round_gib"]) * HK["memory_round_gib"] == rounded


def test_hardware_key_valid_and_invalid():
    for k in HK["valid_keys"]:
        assert hardware.is_valid_hardware_key(k), k
    for k in HK["invalid_keys"]:
        assert not hardware.is_valid_hardware_key(k), k
    for name in HK["always_valid_device_names"]:
        assert hardware.is_valid_hardware_key(hardware.hardware_key(HardwareId("Vendor X", name))), name
