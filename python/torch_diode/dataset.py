"""Datasets on disk, mirroring shared/src/dataset.cpp.

A dataset is one file holding a wire message of kind "dataset" (the export
format: [hardware_key, [shard message as bin, ...]]), one shard file, or a
directory of such files (*.msgpack, optionally gzip-compressed *.msgpack.gz).
"""
from __future__ import annotations

import gzip
import io
import pathlib
from dataclasses import dataclass, field

import msgpack

from . import wire

MAX_DECOMPRESSED = wire.MAX_MESSAGE_BYTES


@dataclass
class Dataset:
    hardware_key: str = ""
    shards: list[wire.Shard] = field(default_factory=list)

    @property
    def record_count(self) -> int:
        return sum(len(s.records) for s in self.shards)


def _read_maybe_gz(path: pathlib.Path) -> bytes:
    raw = path.read_bytes()
    if raw[:2] != b"\x1f\x8b":
        return raw
    with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
        data = f.read(MAX_DECOMPRESSED + 1)
    if len(data) > MAX_DECOMPRESSED:
        raise wire.WireError(f"{path}: gzip expands past the limit of {MAX_DECOMPRESSED} bytes")
    return data


def encode_dataset(d: Dataset) -> bytes:
    return msgpack.packb(["diode", wire.VERSION, "dataset",
                          [d.hardware_key, [wire.encode(s) for s in d.shards]]], use_bin_type=True)


def _hardware_key(h: wire.HardwareId) -> str:
    from .hardware import hardware_key  # the key rule, mirrored from shared/src/hardware.cpp
    return hardware_key(h)


def decode_dataset(data: bytes) -> Dataset:
    try:
        top = msgpack.unpackb(data, raw=False, max_bin_len=wire.MAX_MESSAGE_BYTES,
                              max_array_len=1_000_000, max_map_len=0, max_ext_len=0)
    except Exception as e:  # msgpack raises several unrelated types
        raise wire.WireError(f"dataset: malformed msgpack ({e})") from None
    if not (isinstance(top, list) and len(top) == 4 and top[0] == "diode" and top[2] == "dataset"):
        raise wire.WireError("message: not a diode dataset message")
    version = top[1]
    if isinstance(version, bool) or not isinstance(version, int) or not wire.MIN_VERSION <= version <= wire.VERSION:
        raise wire.WireError(f"message.version: unsupported wire version {version}")
    body = top[3]
    if not (isinstance(body, list) and len(body) == 2 and isinstance(body[0], str) and isinstance(body[1], list)):
        raise wire.WireError("dataset: expected [hardware_key, [shards]]")
    d = Dataset(body[0])
    for i, blob in enumerate(body[1]):
        if not isinstance(blob, bytes):
            raise wire.WireError(f"dataset.shards[{i}]: expected bin")
        try:
            s = wire.decode_shard(blob)
        except wire.WireError as e:
            raise wire.WireError(f"dataset.shards[{i}]: {e}") from None
        if _hardware_key(s.hardware) != d.hardware_key:
            raise wire.WireError(f"dataset.shards[{i}]: shard of hardware {_hardware_key(s.hardware)} "
                                 f"in a dataset of {d.hardware_key}")
        d.shards.append(s)
    return d


def _add_file(d: Dataset, path: pathlib.Path) -> None:
    data = _read_maybe_gz(path)
    # The kind is the envelope's third element; peek it with a streaming unpacker
    # so a large dataset is not parsed twice.
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(data) + 1)
    unpacker.feed(data)
    try:
        n = unpacker.read_array_header()
        head = [unpacker.unpack() for _ in range(3)] if n == 4 else []
    except Exception:
        head = []
    if len(head) != 3 or head[0] != "diode":
        raise wire.WireError(f"{path}: not a diode message")
    try:
        shards = [wire.decode_shard(data)] if head[2] == "shard" else decode_dataset(data).shards
    except wire.WireError as e:
        raise wire.WireError(f"{path}: {e}") from None
    for s in shards:
        key = _hardware_key(s.hardware)
        d.hardware_key = d.hardware_key or key
        if key != d.hardware_key:
            raise wire.WireError(f"{path}: shard {s.id} is for {key}, the dataset for {d.hardware_key}")
        d.shards.append(s)


def load_dataset(path: str | pathlib.Path) -> Dataset:
    p = pathlib.Path(path)
    d = Dataset()
    if p.is_dir():
        for f in sorted(p.iterdir()):
            if f.is_file() and (f.name.endswith(".msgpack") or f.name.endswith(".msgpack.gz")):
                _add_file(d, f)
    else:
        _add_file(d, p)
    return d
