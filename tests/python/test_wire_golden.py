"""Python and C++ agree byte for byte on every wire type (golden files are C++'s)."""
import math

import msgpack
import pytest

from torch_diode import wire


CASES = {
    "hardware": wire.hardware_from_json,
    "problem": wire.problem_from_json,
    "config": wire.config_from_json,
    "record": wire.record_from_json,
    "shard": wire.shard_from_json,
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_encode_matches_cpp_golden_bytes(kind, golden_cases, golden_dir):
    value = CASES[kind](golden_cases[kind])
    assert wire.encode(value) == (golden_dir / f"{kind}.msgpack").read_bytes()


@pytest.mark.parametrize("kind", sorted(CASES))
def test_decode_cpp_golden_bytes(kind, golden_cases, golden_dir):
    decoded = wire.decode((golden_dir / f"{kind}.msgpack").read_bytes(), kind)
    assert decoded == CASES[kind](golden_cases[kind])


def test_shard_hash_is_cpp_hash(golden_cases, golden_dir):
    s = wire.decode_shard((golden_dir / "shard.msgpack").read_bytes())
    assert s.sha256 == wire.content_hash(s)
    assert s.expanded_records()[3].flags & wire.FLAG_REPLAYED


def _shard_bytes(golden_dir):
    return (golden_dir / "shard.msgpack").read_bytes()


def test_truncation_at_every_length_is_an_error(golden_dir):
    data = _shard_bytes(golden_dir)
    for n in range(len(data)):
        with pytest.raises(wire.WireError):
            wire.decode_shard(data[:n])


def test_every_flipped_byte_is_rejected(golden_dir):
    data = _shard_bytes(golden_dir)
    for i in range(len(data)):
        mutated = bytearray(data)
        mutated[i] ^= 0x5A
        with pytest.raises(wire.WireError):
            wire.decode_shard(bytes(mutated))


def test_unknown_version(golden_dir):
    data = msgpack.packb(["diode", 7, "shard", None])
    with pytest.raises(wire.WireError, match="unsupported wire version 7"):
        wire.decode_shard(data)


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
