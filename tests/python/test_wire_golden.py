"""Python and C++ agree byte for byte on every wire type (golden files of versions 1
and 2 are C++'s, those of version 3, *_v3.msgpack, Python's; both languages encode every
case of cases.json and compare with them)."""
import json
import hashlib
import math
import pathlib
import re

import msgpack
import pytest

from torch_diode import dataset, wire

DATASETS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "datasets"


# Golden case (cases.json key and file name) -> (message kind, JSON reader).
# `shard` is wire version 2; `shard_v1` the same content as a version 1 shard; the
# *_v3 cases are scaled_mm problems (and a shard with templates), wire version 3.
CASES = {
    "hardware": ("hardware", wire.hardware_from_json),
    "problem": ("problem", wire.problem_from_json),
    "config": ("config", wire.config_from_json),
    "record": ("record", wire.record_from_json),
    "shard": ("shard", wire.shard_from_json),
    "shard_v1": ("shard", wire.shard_from_json),
    "problem_v3": ("problem", wire.problem_from_json),
    "record_v3": ("record", wire.record_from_json),
    "shard_v3": ("shard", wire.shard_from_json),
}
SHARD_FILES = ("shard.msgpack", "shard_v1.msgpack", "shard_v3.msgpack")


@pytest.mark.parametrize("case", sorted(CASES))
def test_encode_matches_cpp_golden_bytes(case, golden_cases, golden_dir):
    value = CASES[case][1](golden_cases[case])
    assert wire.encode(value) == (golden_dir / f"{case}.msgpack").read_bytes()


@pytest.mark.parametrize("case", sorted(CASES))
def test_decode_cpp_golden_bytes(case, golden_cases, golden_dir):
    kind, from_json = CASES[case]
    decoded = wire.decode((golden_dir / f"{case}.msgpack").read_bytes(), kind)
    assert decoded == from_json(golden_cases[case])


def test_shard_hash_is_cpp_hash(golden_cases, golden_dir):
    s = wire.decode_shard((golden_dir / "shard.msgpack").read_bytes())
    assert s.sha256 == wire.content_hash(s)
    assert s.expanded_records()[3].flags & wire.FLAG_REPLAYED


def test_v2_shard_fields(golden_dir):
    data = (golden_dir / "shard.msgpack").read_bytes()
    assert data[:15] == b"\x94\xa5diode\x02\xa5shard\x9a"
    s = wire.decode_shard(data)
    assert s.wire_version == 2
    assert s.method == wire.CollectionMethod("cuda-events+spin+cold-l2", "torch_diode.collect 2.0.0")
    assert s.problem_wall_s == (41.375, 7.8125)
    # The hash covers 0x99 (the array of the 9 content fields) + their bytes.
    assert s.sha256 == hashlib.sha256(b"\x99" + data[15:-34]).digest()


def test_v1_shard_decodes_and_reencodes_to_its_bytes_and_hash(golden_cases, golden_dir):
    data = (golden_dir / "shard_v1.msgpack").read_bytes()
    assert data[:15] == b"\x94\xa5diode\x01\xa5shard\x98"
    s = wire.decode_shard(data)
    assert s.wire_version == 1
    assert s.method == wire.CollectionMethod("", "")
    assert s.problem_wall_s == ()
    assert wire.encode(s) == data
    assert wire.content_hash(s) == s.sha256 == hashlib.sha256(b"\x97" + data[15:-34]).digest()
    # The same content as version 2 is another shard with another hash.
    v2 = wire.seal(wire.replace(s, wire_version=2))
    assert v2.sha256 != s.sha256
    assert wire.decode_shard(wire.encode(v2)) == v2
    # The v1 and v2 golden cases differ only in the version 2 fields.
    g = wire.shard_from_json(golden_cases["shard"])
    assert wire.seal(wire.replace(g, method=wire.CollectionMethod(), problem_wall_s=(), wire_version=1)) == s


def test_committed_datasets_keep_decoding_with_their_hashes():
    shards = dataset.load_dataset(DATASETS / "nvidia-h100-80gb").shards
    assert shards
    for s in shards:
        assert s.wire_version == 1, s.id
        assert wire.content_hash(s) == s.sha256, s.id
        assert wire.decode_shard(wire.encode(s)) == s, s.id


def test_every_kind_written_in_version_2_and_read_in_version_1(golden_cases):
    p = wire.problem_from_json(golden_cases["problem"])
    data = wire.encode(p)
    assert data[7] == 2
    assert wire.decode(data[:7] + b"\x01" + data[8:], "problem") == p


def _shard_bytes(golden_dir, name="shard.msgpack"):
    return (golden_dir / name).read_bytes()


@pytest.mark.parametrize("name", SHARD_FILES)
def test_truncation_at_every_length_is_an_error(golden_dir, name):
    data = _shard_bytes(golden_dir, name)
    for n in range(len(data)):
        with pytest.raises(wire.WireError):
            wire.decode_shard(data[:n])


@pytest.mark.parametrize("name", SHARD_FILES)
def test_every_flipped_byte_is_rejected(golden_dir, name):
    data = _shard_bytes(golden_dir, name)
    for i in range(len(data)):
        mutated = bytearray(data)
        mutated[i] ^= 0x5A
        with pytest.raises(wire.WireError):
            wire.decode_shard(bytes(mutated))


@pytest.mark.parametrize("version", [0, 4, 7])
def test_unknown_version(golden_dir, version):
    data = msgpack.packb(["diode", version, "shard", None])
    with pytest.raises(wire.WireError, match=f"^message.version: unsupported wire version {version} "):
        wire.decode_shard(data)


def test_shard_layout_must_match_envelope_version(golden_dir):
    v2 = bytearray(_shard_bytes(golden_dir))
    v2[7] = 1
    with pytest.raises(wire.WireError, match=re.escape("shard: expected array of 8 (a wire version 1 shard), got 10")):
        wire.decode_shard(bytes(v2))
    v1 = bytearray(_shard_bytes(golden_dir, "shard_v1.msgpack"))
    v1[7] = 2
    with pytest.raises(wire.WireError, match=re.escape("shard: expected array of 10 (a wire version 2 shard), got 8")):
        wire.decode_shard(bytes(v1))


def test_version_1_shard_cannot_carry_version_2_fields(golden_cases):
    s = wire.shard_from_json(golden_cases["shard_v1"])
    with pytest.raises(wire.WireError, match="^shard.method: cannot be written in wire version 1"):
        wire.seal(wire.replace(s, method=wire.CollectionMethod("cuda-events", "")))
    with pytest.raises(wire.WireError, match="^shard.problem_wall_s: cannot be written in wire version 1"):
        wire.encode(wire.replace(s, problem_wall_s=(1.0, 2.0)))
    with pytest.raises(wire.WireError, match="^shard.wire_version: unsupported wire version 4"):
        wire.encode(wire.replace(s, wire_version=4))
    d = dict(golden_cases["shard"], wire_version=1)
    with pytest.raises(wire.WireError):
        wire.shard_from_json(d)


@pytest.mark.parametrize("wall,error", [
    ((1.0,), "shard.problem_wall_s: expected 0 or 2 values (one per problem), got 1"),
    ((1.0, 2.0, 3.0), "shard.problem_wall_s: expected 0 or 2 values (one per problem), got 3"),
    ((1.0, -0.5), "shard.problem_wall_s[1]: negative wall time"),
    ((math.nan, 1.0), "shard.problem_wall_s[0]: not a finite number"),
    ((1.0, math.inf), "shard.problem_wall_s[1]: not a finite number"),
])
def test_wall_times_one_per_problem_finite_non_negative(golden_cases, wall, error):
    s = wire.seal(wire.replace(wire.shard_from_json(golden_cases["shard"]), problem_wall_s=wall))
    with pytest.raises(wire.WireError, match=f"^{re.escape(error)}$"):
        wire.decode_shard(wire.encode(s))


@pytest.mark.parametrize("wall", [(), (0.0, 0.0)])
def test_no_or_zero_wall_times_are_valid(golden_cases, wall):
    s = wire.seal(wire.replace(wire.shard_from_json(golden_cases["shard"]), problem_wall_s=wall))
    assert wire.decode_shard(wire.encode(s)) == s


def test_method_is_two_strings(golden_cases):
    s = wire.shard_from_json(golden_cases["shard"])
    body = wire._shard_content(s) + [s.sha256]
    body[7] = [7, "x"]
    with pytest.raises(wire.WireError, match=r"^shard.method.timing: expected str, got uint$"):
        wire.decode_shard(msgpack.packb(["diode", 2, "shard", body], use_bin_type=True))
    body[7] = ["x"]
    with pytest.raises(wire.WireError, match=r"^shard.method: expected array of 2, got 1$"):
        wire.decode_shard(msgpack.packb(["diode", 2, "shard", body], use_bin_type=True))
    empty = wire.seal(wire.replace(s, method=wire.CollectionMethod("", "")))
    assert wire.decode_shard(wire.encode(empty)) == empty


def test_shard_json_round_trip(golden_cases):
    for case in ("shard", "shard_v1"):
        s = wire.shard_from_json(golden_cases[case])
        j = wire.to_json(s)
        assert j["wire_version"] == s.wire_version
        assert wire.shard_from_json(j) == s
    j = wire.to_json(wire.shard_from_json(golden_cases["shard"]))
    j["sha256"] = "00" * 32
    with pytest.raises(wire.WireError, match="^shard.sha256: does not match the content$"):
        wire.shard_from_json(j)


# ---- the Python decoder is as strict as the C++ one (same messages as
# WireStrict.ExtraDuplicateKeyRejected / ExtraValueAboveInt64Rejected) -------

def _config_with_extra(golden_cases, extra_map_bytes: bytes) -> bytes:
    body = wire._config(wire.config_from_json(golden_cases["config"]))[:11]
    head = msgpack.packb(["diode", 2, "config"], use_bin_type=True)
    # A 4-element envelope whose body is the config with a hand-written extra map.
    return (b"\x94" + head[1:] + b"\x9c" + b"".join(msgpack.packb(v, use_bin_type=True) for v in body)
            + extra_map_bytes)


def test_extra_duplicate_key_rejected(golden_cases):
    data = _config_with_extra(golden_cases, b"\x82\xa1a\x01\xa1a\x02")
    with pytest.raises(wire.WireError, match=r"^config.extra\[1\]: duplicate key 'a'$"):
        wire.decode(data, "config")


def test_extra_value_above_int64_rejected(golden_cases):
    data = _config_with_extra(golden_cases, b"\x81\xa1a" + msgpack.packb(2**63))
    with pytest.raises(wire.WireError, match=r"^config.extra\[0\]: value out of int64 range$"):
        wire.decode(data, "config")
    # INT64_MAX and INT64_MIN are fine.
    ok = wire.decode(_config_with_extra(golden_cases, b"\x82\xa1a" + msgpack.packb(2**63 - 1)
                                        + b"\xa1b" + msgpack.packb(-2**63)), "config")
    assert ok.extra == (("a", 2**63 - 1), ("b", -2**63))


def test_extra_keys_must_be_sorted(golden_cases):
    data = _config_with_extra(golden_cases, b"\x82\xa1b\x01\xa1a\x02")
    with pytest.raises(wire.WireError, match=r"^config.extra\[1\]: keys not in sorted order$"):
        wire.decode(data, "config")


def test_wrong_type_names_path(golden_cases):
    body = wire._problem(wire.problem_from_json(golden_cases["problem"]))
    body[1] = "one"
    with pytest.raises(wire.WireError, match=r"^problem.batch: expected uint, got str$"):
        wire.decode(msgpack.packb(["diode", 1, "problem", body], use_bin_type=True))


@pytest.mark.parametrize("bad", [math.nan, -1.0, math.inf])
def test_bad_times(golden_cases, bad):
    rec = wire.record_from_json(golden_cases["record"])
    with pytest.raises(wire.WireError):
        wire.decode(wire.encode(wire.replace(rec, median_us=bad)))


def test_huge_array_header(golden_dir):
    # Envelope whose body is an array32 header claiming 4 billion elements.
    data = b"\x94\xa5diode\x01\xa5shard\xdd\xff\xff\xff\xff"
    with pytest.raises(wire.WireError):
        wire.decode_shard(data)


def test_trailing_bytes(golden_dir):
    with pytest.raises(wire.WireError, match="1 trailing bytes"):
        wire.decode_shard(_shard_bytes(golden_dir) + b"x")


def test_tampered_hash(golden_cases):
    s = wire.shard_from_json(golden_cases["shard"])
    s.records[1] = wire.replace(s.records[1], median_us=1.0)
    with pytest.raises(wire.WireError, match="content hash does not match"):
        wire.decode_shard(wire.encode(s))


# ---- wire version 3: Problem.scale, op scaled_mm, Shard.templates --------------------

def test_v3_golden_versions_and_layout(golden_dir):
    for name, kind in (("problem_v3", "problem"), ("record_v3", "record"), ("shard_v3", "shard")):
        data = (golden_dir / f"{name}.msgpack").read_bytes()
        assert data[7] == 3, name
    shard = (golden_dir / "shard_v3.msgpack").read_bytes()
    assert shard[:15] == b"\x94\xa5diode\x03\xa5shard\x9b"
    s = wire.decode_shard(shard)
    assert s.wire_version == 3
    assert [p.scale for p in s.problems] == ["tensor", "row"]
    assert [n for n, _ in s.templates] == ["triton::mm", "triton::mm_persistent_tma"]
    # The hash covers 0x9a (the array of the 10 content fields) + their bytes.
    assert s.sha256 == hashlib.sha256(b"\x9a" + shard[15:-34]).digest()
    assert wire.family_of(s.problems[0].op) == "scaled_mm"


def test_gemm_content_is_written_in_version_2(golden_cases):
    # Nothing of version 3 in it: the version 2 bytes, whatever the newest version.
    s = wire.shard_from_json(golden_cases["shard"])
    assert wire.write_version(s) == 2 and wire.encode(s)[7] == 2
    assert wire.encode(wire.problem_from_json(golden_cases["problem"]))[7] == 2
    assert wire.encode(wire.record_from_json(golden_cases["record"]))[7] == 2


def test_version_2_shard_with_version_3_content_is_sealed_as_version_3(golden_cases):
    g = wire.shard_from_json(golden_cases["shard"])
    h = "ab" * 32
    s = wire.Shard(g.id, g.sweep_id, g.hardware, g.producer, g.created_ms, list(g.problems), list(g.records),
                   method=g.method, problem_wall_s=g.problem_wall_s, templates=(("triton::mm", h),))
    assert s.wire_version == 3
    wire.seal(s)
    back = wire.decode_shard(wire.encode(s))
    assert back == s and back.templates == (("triton::mm", h),)
    # Added after construction: encode and seal still write version 3.
    t = wire.shard_from_json(golden_cases["shard"])
    t.templates = (("triton::mm", h),)
    assert wire.encode(t)[7] == 3
    wire.seal(t)
    assert t.wire_version == 3 and wire.decode_shard(wire.encode(t)) == t


def test_version_1_shard_cannot_carry_version_3_fields(golden_cases):
    s = wire.shard_from_json(golden_cases["shard_v1"])
    with pytest.raises(wire.WireError, match=r"^shard.templates: cannot be written in wire version 1 \(set wire_version to 3\)$"):
        wire.seal(wire.replace(s, templates=(("a", "0" * 64),)))
    p = wire.problem_from_json(golden_cases["problem_v3"])
    with pytest.raises(wire.WireError, match=r"^shard.problems\[1\]: op scaled_mm with scale tensor cannot be written "
                                             r"in wire version 1 \(set wire_version to 3\)$"):
        wire.seal(wire.replace(s, problems=[s.problems[0], p]))


def test_version_3_fields_only_in_version_3_messages(golden_dir, golden_cases):
    # A version 3 problem (14 fields) in a version 2 envelope, and a version 2 one in a version 3 envelope.
    v3 = bytearray((golden_dir / "problem_v3.msgpack").read_bytes())
    v3[7] = 2
    with pytest.raises(wire.WireError, match=r"^problem: expected array of 13, got 14$"):
        wire.decode(bytes(v3), "problem")
    v2 = bytearray((golden_dir / "problem.msgpack").read_bytes())
    v2[7] = 3
    with pytest.raises(wire.WireError, match=r"^problem: expected array of 14, got 13$"):
        wire.decode(bytes(v2), "problem")
    # A GEMM problem in a version 3 message carries scale "none" and decodes.
    p = wire.problem_from_json(golden_cases["problem"])
    body = wire._problem(p, 3)
    assert wire.decode(msgpack.packb(["diode", 3, "problem", body], use_bin_type=True), "problem") == p
    # scaled_mm cannot travel without its scale (version 2: scale is "none").
    body = wire._problem(wire.problem_from_json(golden_cases["problem_v3"]), 2)
    with pytest.raises(wire.WireError, match=r"^problem.scale: op scaled_mm needs scale tensor or row$"):
        wire.decode(msgpack.packb(["diode", 2, "problem", body], use_bin_type=True), "problem")
    shard = bytearray((golden_dir / "shard_v3.msgpack").read_bytes())
    shard[7] = 2
    with pytest.raises(wire.WireError, match=re.escape("shard: expected array of 10 (a wire version 2 shard), got 11")):
        wire.decode_shard(bytes(shard))


def _v3_shard_body(golden_cases, templates):
    s = wire.shard_from_json(golden_cases["shard_v3"])
    body = wire._shard_content(s) + [s.sha256]
    body[9] = templates
    return msgpack.packb(["diode", 3, "shard", body], use_bin_type=True)


@pytest.mark.parametrize("templates,error", [
    ("x", "shard.templates: expected array, got str"),
    ([["a", "0" * 64]] * 65, "shard.templates: more than 64 entries"),
    ([["a"]], "shard.templates[0]: expected array of 2, got 1"),
    ([[1, "0" * 64]], "shard.templates[0].name: expected str, got uint"),
    ([["n" * 129, "0" * 64]], "shard.templates[0].name: string longer than 128 bytes"),
    ([["", "0" * 64]], "shard.templates[0].name: empty"),
    ([["a", "0" * 63]], "shard.templates[0].sha256: expected 64 lower-case hex digits"),
    ([["a", "A" * 64]], "shard.templates[0].sha256: expected 64 lower-case hex digits"),
    ([["a", "0" * 64], ["a", "1" * 64]], "shard.templates[1]: duplicate name 'a'"),
    ([["b", "0" * 64], ["a", "1" * 64]], "shard.templates[1]: names not in sorted order"),
])
def test_templates_are_checked(golden_cases, templates, error):
    with pytest.raises(wire.WireError, match=f"^{re.escape(error)}$"):
        wire.decode_shard(_v3_shard_body(golden_cases, templates))
    if isinstance(templates, list) and all(len(t) == 2 and isinstance(t[0], str) for t in templates):
        with pytest.raises(wire.WireError, match=f"^{re.escape(error)}$"):
            wire.check_templates(tuple(tuple(t) for t in templates))


def test_templates_changed_means_hash_mismatch(golden_cases):
    with pytest.raises(wire.WireError, match="content hash does not match"):
        wire.decode_shard(_v3_shard_body(golden_cases, [["triton::mm", "0" * 64]]))


PROBLEM_RULES = json.loads((pathlib.Path(__file__).resolve().parents[1] / "golden" / "problem_rules.json").read_text())


@pytest.mark.parametrize("case", PROBLEM_RULES["cases"], ids=[c["name"] for c in PROBLEM_RULES["cases"]])
def test_problem_rules(case):
    """The shared list: C++ (WireV3.ProblemRules) checks the same messages."""
    if case["error"] is None:
        p = wire.problem_from_json(case["problem"])
        assert wire.decode(wire.encode(p), "problem") == p
        assert wire.to_json(p) == {**case["problem"], "scale": p.scale} or p.scale == "none"
        return
    with pytest.raises(wire.WireError) as e:
        wire.problem_from_json(case["problem"])
    assert str(e.value) == case["error"]
    # The decoder gives the same message for the same problem on the wire.
    d = dict(case["problem"])
    p = wire.Problem(**{**d, "alpha": float(d["alpha"]), "beta": float(d["beta"])})
    with pytest.raises(wire.WireError) as e:
        wire.decode(msgpack.packb(["diode", 3, "problem", wire._problem(p, 3)], use_bin_type=True), "problem")
    assert str(e.value) == case["error"]


def test_problem_json_scale_only_when_not_none(golden_cases):
    assert "scale" not in wire.to_json(wire.problem_from_json(golden_cases["problem"]))
    assert wire.to_json(wire.problem_from_json(golden_cases["problem_v3"]))["scale"] == "tensor"
    assert "templates" not in wire.to_json(wire.shard_from_json(golden_cases["shard"]))
    j = wire.to_json(wire.shard_from_json(golden_cases["shard_v3"]))
    assert j == golden_cases["shard_v3"]


def test_families():
    assert wire.FAMILIES == {"gemm": ("mm", "addmm", "bmm", "baddbmm"), "scaled_mm": ("scaled_mm",)}
    assert [wire.family_of(op) for op in wire.OPS] == ["gemm"] * 4 + ["scaled_mm"]
    assert wire.family_of("conv") == ""
