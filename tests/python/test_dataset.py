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
