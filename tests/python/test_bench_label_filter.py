"""bench/label_filter.py: which records a filtered training copy keeps, and that the copy
holds the same problems (so the trainer's splits are the same)."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import label_filter as lf  # noqa: E402
from torch_diode import wire  # noqa: E402
from torch_diode.collect.engine import FLAG_STATIC  # noqa: E402
from torch_diode.dataset import load_dataset  # noqa: E402

H100 = ROOT / "datasets/nvidia-h100-80gb"


def rec(us, flags=0, template="triton::mm", status="ok"):
    return wire.ShardRecord(0, wire.KernelConfig(template=template, block_m=64), median_us=us, status=status,
                            flags=flags)


def test_keep_rules():
    static, runtime, aten = rec(10.0, FLAG_STATIC), rec(11.0), rec(12.0, template="aten")
    failed = rec(0.0, status="compile_error")
    for r in (static, aten, failed):
        assert lf.keep_record(r, 10.0, "static-only", 0) and lf.keep_record(r, 10.0, "near", 1.25)
    assert not lf.keep_record(runtime, 10.0, "static-only", 0)
    assert not lf.keep_record(runtime, 10.0, "near", 1.25)          # 11 < 12.5: a near contender
    assert lf.keep_record(rec(13.0), 10.0, "near", 1.25)            # slow: kept
    assert lf.keep_record(runtime, None, "static-only", 0)          # no static record in the problem


def test_filtered_copy_has_the_same_problems(tmp_path):
    f = "2026-11-26-recollect-2026112604-p033-033.msgpack.gz"
    src = tmp_path / "src"
    src.mkdir()
    (src / f).symlink_to(H100 / f)
    assert lf.main([str(src), str(tmp_path / "out"), "--mode", "near", "1.25"]) == 0
    a, b = load_dataset(str(src)).shards[0], load_dataset(str(tmp_path / "out")).shards[0]
    assert a.problems == b.problems and a.id == b.id and 0 < len(b.records) < len(a.records)
    best = min(r.median_us for r in a.records if r.flags & FLAG_STATIC and r.status == "ok")
    assert all(r.flags & FLAG_STATIC or not r.config.is_triton or r.status != "ok" or r.median_us >= 1.25 * best
               for r in b.records)
