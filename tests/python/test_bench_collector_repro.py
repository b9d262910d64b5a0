"""bench/collector_reproducibility.py on two hand-made shards of the same problems, whose
offsets, noise, best configs and cross regrets are known."""
import gzip
import json
import math
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import collector_reproducibility as cr  # noqa: E402
from torch_diode import wire  # noqa: E402
from torch_diode.collect import records  # noqa: E402

T1 = wire.KernelConfig(template="triton::mm", block_m=64, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=4)
T2 = wire.KernelConfig(template="triton::mm", block_m=32, block_n=64, block_k=64, group_m=8, num_stages=3, num_warps=4)
ATEN = wire.KernelConfig(template="aten")
P0 = wire.Problem(op="mm", m=128, n=256, k=512)
P1 = wire.Problem(op="mm", m=64, n=64, k=64)
P2 = wire.Problem(op="mm", m=8, n=8, k=8)      # only in A: not compared


def _write(path, probs, recs):
    hw = wire.HardwareId(vendor="nvidia", device_name="NVIDIA H200")
    path.write_bytes(gzip.compress(records.build_shard("s/1", "", hw, "t", "", probs, recs)))
    return str(path)


def test_known_pairs(tmp_path, capsys):
    a = _write(tmp_path / "a.msgpack.gz", [P0, P1, P2], [
        wire.ShardRecord(0, T1, 10.0, 0, 10, "ok"), wire.ShardRecord(0, T2, 11.0, 0, 10, "ok"),
        wire.ShardRecord(0, ATEN, 20.0, 0, 10, "ok"),
        wire.ShardRecord(1, T1, 5.0, 0, 10, "ok"), wire.ShardRecord(1, ATEN, 4.0, 0, 10, "ok"),
        wire.ShardRecord(1, T2, 1.0, 0, 10, "out_of_resources"),    # not ok: never compared
        wire.ShardRecord(2, T1, 1.0, 0, 10, "ok"), wire.ShardRecord(2, T2, 2.0, 0, 10, "ok")])
    b = _write(tmp_path / "b.msgpack.gz", [P1, P0], [
        # P0 on B: T2 now fastest (the two trade places), ATen as on A
        wire.ShardRecord(1, T1, 11.0, 0, 10, "ok"), wire.ShardRecord(1, T2, 10.0, 0, 10, "ok"),
        wire.ShardRecord(1, ATEN, 20.0, 0, 10, "ok"),
        # P1 on B: every time 10% slower (a machine offset alone), ATen fastest on both
        wire.ShardRecord(0, T1, 5.5, 0, 10, "ok"), wire.ShardRecord(0, ATEN, 4.4, 0, 10, "ok"),
        # T2 timed as a static-shape kernel on B only: not the same measurement, not compared
        wire.ShardRecord(0, T2, 0.5, 0, 10, "ok", cr.STATIC)])
    out = tmp_path / "s.json"
    assert cr.main([a, b, "--json", str(out)]) == 0
    s = json.loads(out.read_text())
    assert s["problems"] == 2 and s["configs"] == 5
    assert s["same_best"] == 0.5 and s["aten_agrees"] == 1.0
    # P0: A's best T1 costs 11 on B against B's best 10; B's best T2 costs 11 on A against 10
    assert s["regret_ab_max"] == pytest.approx(1.1) and s["regret_ba_max"] == pytest.approx(1.1)
    assert s["regret_ab_geomean"] == pytest.approx(math.sqrt(1.1))
    assert s["offset_max"] == pytest.approx(1.1)                    # P1's offset
    assert s["offset_min"] == pytest.approx(1.0)                    # P0's median ratio (1.1, 10/11, 1.0)
    assert "2 problems, 5 configs timed on both machines" in capsys.readouterr().out
    # --split-k: P1 (K = 64) and P0 (K = 512) apart
    assert cr.main([a, b, "--split-k", "100", "--json", str(out)]) == 0
    s = json.loads(out.read_text())
    assert s["K <= 100"]["problems"] == 1 and s["K <= 100"]["regret_ab_max"] == pytest.approx(1.0)
    assert s["K > 100"]["problems"] == 1 and s["K > 100"]["regret_ab_max"] == pytest.approx(1.1)
    assert s["problems"] == 2


def test_pairs_without_shared_problems_are_an_error(tmp_path):
    a = _write(tmp_path / "a.msgpack.gz", [P0], [wire.ShardRecord(0, T1, 1.0, 0, 1, "ok"),
                                                   wire.ShardRecord(0, T2, 2.0, 0, 1, "ok")])
    b = _write(tmp_path / "b.msgpack.gz", [P1], [wire.ShardRecord(0, T1, 1.0, 0, 1, "ok"),
                                                   wire.ShardRecord(0, T2, 2.0, 0, 1, "ok")])
    assert cr.main([a, b]) == 2
    with pytest.raises(SystemExit):
        cr.main([a])                                                # not a pair
