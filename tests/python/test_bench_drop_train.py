"""bench/drop_train_problems.py: which train problems of the kind are left out (by hash), and
that every other problem and record is copied unchanged into re-sealed shards."""
import gzip
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import drop_train_problems as d  # noqa: E402
from torch_diode import wire  # noqa: E402
from torch_diode.collect import records  # noqa: E402
from torch_diode.dataset import load_dataset  # noqa: E402

T = wire.KernelConfig(template="triton::bmm", block_m=64, block_n=64, block_k=32, group_m=8, num_stages=3,
                      num_warps=4)
SHORT = [wire.Problem(op="bmm", batch=8, m=256, n=256, k=64 - 16 * i) for i in range(3)]
LONG = wire.Problem(op="bmm", batch=8, m=256, n=256, k=4096)


def _entry(p, h):   # what `diode validate --list-split --json` lists (the fields problem_key reads)
    return {"problem": h, "op": p.op, "batch": p.batch, "m": p.m, "n": p.n, "k": p.k, "dtype_a": p.dtype_a,
            "dtype_b": p.dtype_b, "dtype_out": p.dtype_out, "trans_a": p.trans_a, "trans_b": p.trans_b,
            "bias": p.bias}


def test_keep_share_by_hash_and_only_the_kind():
    train = [_entry(SHORT[0], "10"), _entry(SHORT[1], "11"), _entry(SHORT[2], "13"), _entry(LONG, "21")]
    assert d.dropped_keys(train, 64, (1, 2)) == {d.problem_key(SHORT[1]), d.problem_key(SHORT[2])}  # odd hashes
    assert d.dropped_keys(train, 64, (1, 4)) == {d.problem_key(SHORT[1]), d.problem_key(SHORT[2])}  # 0x10 % 4 == 0
    assert d.dropped_keys(train, 64, (2, 2)) == set()                                                 # keep all
    assert d.problem_key(LONG) not in d.dropped_keys(train, 64, (0, 1))                               # not the kind


def test_copy_without_the_dropped_problems(tmp_path):
    src = tmp_path / "ds"
    src.mkdir()
    hw = wire.HardwareId(vendor="nvidia", device_name="NVIDIA H200")
    probs = [SHORT[0], SHORT[1], LONG]
    recs = [wire.ShardRecord(i, T, 10.0 + i, 0.1, 5, "ok") for i in range(3)] + [
        wire.ShardRecord(i, wire.KernelConfig(template="aten"), 20.0 + i, 0.1, 5, "ok") for i in range(3)]
    (src / "a.msgpack.gz").write_bytes(gzip.compress(records.build_shard("s/1", "", hw, "t", "", probs, recs)))
    split = tmp_path / "train.json"
    split.write_text(json.dumps([_entry(SHORT[0], "10"), _entry(SHORT[1], "11"), _entry(LONG, "21")]))
    out = tmp_path / "half"
    assert d.main([str(src), "--split-list", str(split), "--max-k", "64", "--keep", "1/2", "--out", str(out)]) == 0
    shards = load_dataset(str(out)).shards
    assert len(shards) == 1
    s = shards[0]
    assert s.problems == [SHORT[0], LONG]
    got = {(s.problems[r.problem_index], r.config.template): r.median_us for r in s.records}
    assert got == {(SHORT[0], "triton::bmm"): 10.0, (LONG, "triton::bmm"): 12.0,
                   (SHORT[0], "aten"): 20.0, (LONG, "aten"): 22.0}
    assert s.sha256 == wire.seal(s).sha256                                # re-sealed: the hash is its content's
    with pytest.raises(SystemExit):
        d.main([str(src), "--split-list", str(split), "--max-k", "64", "--keep", "3/2", "--out", str(tmp_path / "x")])
