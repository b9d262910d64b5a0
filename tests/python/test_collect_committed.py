"""torch_diode.collect.committed: the one reading of committed dataset file names, used by
datasets/collect.sh (resume) and datasets/add_parts.py (overlaps)."""
import json
import subprocess
import sys

from torch_diode.collect.committed import COMMITTED, committed_name, committed_ranges, resume_index


def test_ranges_and_resume_from_committed_files_and_parts(tmp_path):
    ds = tmp_path / "datasets"
    (ds / "nvidia-h100-80gb").mkdir(parents=True)
    (ds / "nvidia-h200-144gb").mkdir()
    (ds / "README.md").write_text("not a hardware folder")
    for name in ("2026-11-26-mix2-7-p000-009.msgpack.gz", "2026-11-26-mix2-7-p010-041.msgpack.gz",
                 "2026-11-26-mix2-77-p000-099.msgpack.gz",     # seed 77, not 7
                 "2026-11-26-recollect-7-p000-200.msgpack",     # not gzip: not a committed file
                 "2026-11-26-mix2-7-p050-060.msgpack.gz.tmp"):
        (ds / "nvidia-h100-80gb" / name).write_bytes(b"")
    (ds / "nvidia-h200-144gb" / "2026-11-26-mix2-7-p042-044.msgpack.gz").write_bytes(b"")
    assert committed_ranges(str(ds / "nvidia-h100-80gb"), "7") == [
        (0, 9, "2026-11-26-mix2-7-p000-009.msgpack.gz"), (10, 41, "2026-11-26-mix2-7-p010-041.msgpack.gz")]
    assert committed_ranges(str(ds / "missing"), "7") == []
    carry = tmp_path / "carry"
    carry.mkdir()
    assert resume_index(str(carry), "7", str(ds)) == 45        # the H200 folder's 42-44
    assert resume_index(str(carry), "8", str(ds)) == 0
    (carry / "part-045.msgpack.stats.json").write_text(json.dumps({"problems": [{"index": 45}, {"index": 46}]}))
    assert resume_index(str(carry), "7", str(ds)) == 47        # the warm machine's own part
    r = subprocess.run([sys.executable, "-m", "torch_diode.collect.committed", "resume", str(carry), "7",
                        "--datasets", str(ds)], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "47"
    bad = subprocess.run([sys.executable, "-m", "torch_diode.collect.committed", "resume", str(carry), "7x"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "expected digits" in bad.stderr


def test_the_name_written_is_the_name_read():
    name = committed_name("2026-11-26", "mix2", "2026112523", 68, 120)
    assert name == "2026-11-26-mix2-2026112523-p068-120.msgpack.gz"
    assert COMMITTED.search(name).groups() == ("2026112523", "068", "120")
