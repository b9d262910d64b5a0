"""Datasets written by C++ load in Python and vice versa (same message format)."""
import gzip
import subprocess

import pytest

from torch_diode import dataset, wire


def _shard(golden_cases, sid):
    s = wire.shard_from_json(golden_cases["shard"])
    s.id = sid
    return wire.seal(s)


def test_round_trip_and_directory(tmp_path, golden_cases):
    d = dataset.Dataset("nvidia-h100-80gb", [_shard(golden_cases, "a"), _shard(golden_cases, "b")])
    blob = dataset.encode_dataset(d)
    back = dataset.decode_dataset(blob)
    assert back.hardware_key == "nvidia-h100-80gb"
    assert [s.id for s in back.shards] == ["a", "b"]
    assert back.record_count == 8

    (tmp_path / "1.msgpack").write_bytes(wire.encode(_shard(golden_cases, "one")))
    (tmp_path / "2.msgpack.gz").write_bytes(gzip.compress(wire.encode(_shard(golden_cases, "two"))))
    (tmp_path / "3.msgpack.gz").write_bytes(gzip.compress(blob))
    (tmp_path / "readme.txt").write_text("ignored")
    loaded = dataset.load_dataset(tmp_path)
    assert [s.id for s in loaded.shards] == ["one", "two", "a", "b"]


def test_mixed_wire_versions_and_version_1_envelope(golden_cases):
    v1 = wire.shard_from_json(golden_cases["shard_v1"])
    d = dataset.Dataset("nvidia-h100-80gb", [_shard(golden_cases, "a"), v1])
    blob = dataset.encode_dataset(d)
    assert blob[:16] == b"\x94\xa5diode\x02\xa7dataset"
    back = dataset.decode_dataset(blob)
    assert back.shards == d.shards
    assert [s.wire_version for s in back.shards] == [2, 1]
    assert dataset.decode_dataset(blob[:7] + b"\x01" + blob[8:]).shards == d.shards  # written before version 2
    with pytest.raises(wire.WireError, match="unsupported wire version 3"):
        dataset.decode_dataset(blob[:7] + b"\x03" + blob[8:])


def test_wrong_hardware_rejected(golden_cases):
    d = dataset.Dataset("amd-instinct-mi300x-192gb", [_shard(golden_cases, "a")])
    with pytest.raises(wire.WireError, match="in a dataset of amd-instinct-mi300x-192gb"):
        dataset.decode_dataset(dataset.encode_dataset(d))


def test_corrupt_file_named(tmp_path, golden_cases):
    data = bytearray(wire.encode(_shard(golden_cases, "x")))
    data[len(data) // 2] ^= 1
    (tmp_path / "bad.msgpack").write_bytes(bytes(data))
    with pytest.raises(wire.WireError, match="bad.msgpack"):
        dataset.load_dataset(tmp_path)


def test_records_by_problem_groups_every_record_under_its_problem(golden_cases):
    shard = wire.shard_from_json(golden_cases["shard"])
    groups = shard.records_by_problem()
    assert [p for p, _ in groups] == shard.problems and len(shard.problems) > 1
    assert sum(len(rs) for _, rs in groups) == len(shard.records) > 1
    for i, (_, rs) in enumerate(groups):
        assert rs == [r for r in shard.records if r.problem_index == i]   # record order kept
