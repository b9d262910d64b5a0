"""The committed datasets: decodable shards, in the folder their hardware key names."""
import gzip
import pathlib

import pytest

from torch_diode import wire
from torch_diode.hardware import hardware_key, is_valid_hardware_key

pytest.importorskip("torch")
from torch_diode.collect.enumerate import mm_configs  # noqa: E402


def wire_dtype_size(dtype: str) -> int:
    return 4 if dtype == "float32" else 2

DATASETS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "datasets"
SHARDS = sorted(DATASETS.glob("*/*.msgpack.gz"))


def test_datasets_exist_and_fit_the_budget():
    assert SHARDS, "no dataset committed"
    assert (DATASETS / "README.md").is_file()
    assert sum(p.stat().st_size for p in DATASETS.rglob("*") if p.is_file()) <= 20 << 20


@pytest.mark.parametrize("path", SHARDS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shard(path):
    s = wire.decode_shard(gzip.decompress(path.read_bytes()))
    key = hardware_key(s.hardware)
    assert is_valid_hardware_key(key) and path.parent.name == key
    assert s.hardware.arch and s.hardware.driver_version and s.hardware.torch_version and s.hardware.triton_version
    assert s.producer.runner == "inductor"
    assert {r.problem_index for r in s.records} == set(range(len(s.problems)))
    for i, p in enumerate(s.problems):
        mine = [r for r in s.records if r.problem_index == i]
        ok = [r for r in mine if r.status == "ok"]
        assert any(r.config.template == "aten" for r in ok), "every problem has its ATen time"
        # A full exhaustive space, not a sample: one Triton record (of any status) per
        # config Inductor's own EXHAUSTIVE heuristics give for this shape.
        want = len(mm_configs(p.m, p.n, p.k, wire_dtype_size(p.dtype_a), "EXHAUSTIVE"))
        assert sum(r.config.is_triton for r in mine) == want, (p, want)
        assert len({r.config for r in mine}) == len(mine)
        for r in ok:
            assert 0 < r.median_us < 1e7 and r.spread_us >= 0 and r.repeats >= 1
