"""datasets/add_parts.py: a part brought back from the device gets the committed file's name from
its own content (hardware key, mix, seed, first index, problem count, day), byte-identical gzip,
and overlaps or foreign shards are refused with nothing written."""
import gzip
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "datasets"))

import add_parts  # noqa: E402

H100 = ROOT / "datasets/nvidia-h100-80gb"
H200 = ROOT / "datasets/nvidia-h200-144gb"
COMMITTED = [H100 / "2026-11-26-mix2-2026112518-p045-063.msgpack.gz",
             H100 / "2026-11-26-mix2-2026112522-p000-019.msgpack.gz",
             H200 / "2026-11-26-mix2-2026112519-p006-033.msgpack.gz"]


def as_part(tmp_path, committed: pathlib.Path) -> pathlib.Path:
    """The part collect.sh mirrored, as it was before it was committed."""
    first = int(committed.name.split("-p")[1].split("-")[0])
    d = tmp_path / "out" / committed.name.split("-")[4]
    d.mkdir(parents=True, exist_ok=True)
    part = d / f"part-{first:03d}.msgpack"
    part.write_bytes(gzip.decompress(committed.read_bytes()))
    return part


def test_parts_get_the_committed_names_and_bytes(tmp_path, capsys):
    parts = [as_part(tmp_path, c) for c in COMMITTED]
    out = tmp_path / "datasets"
    assert add_parts.main([*map(str, parts), "--datasets", str(out)]) == 0
    for c in COMMITTED:
        written = out / c.parent.name / c.name      # the H200 part lands in the H200 folder
        assert gzip.decompress(written.read_bytes()) == gzip.decompress(c.read_bytes())
    # the two H100 files (2026-11-26, collect_gpus.sh) were written by this same compression (zlib level 9, mtime
    # 0): byte-identical; the H200 file (2026-11-26) came from GNU `gzip -9n`, whose deflate differs
    for c in COMMITTED[:2]:
        assert (out / c.parent.name / c.name).read_bytes() == c.read_bytes()
    text = capsys.readouterr().out
    assert "seed 2026112518, 19 problems (45-63), 18,514 records" in text
    assert "torch_diode.collect 2.5.0" in text
    # a second run finds its own files: refused, nothing rewritten
    assert add_parts.main([*map(str, parts), "--datasets", str(out)]) == 1


def test_overlap_with_a_committed_file_is_refused_and_nothing_written(tmp_path, capsys):
    part = as_part(tmp_path, COMMITTED[0])
    before = sorted(p.name for p in H100.iterdir())
    assert add_parts.main([str(part), "--datasets", str(ROOT / "datasets")]) == 1
    assert "overlap 2026-11-26-mix2-2026112518-p045-063.msgpack.gz" in capsys.readouterr().err
    assert sorted(p.name for p in H100.iterdir()) == before


def test_two_parts_of_one_call_that_overlap_are_refused(tmp_path):
    part = as_part(tmp_path, COMMITTED[1])                  # problems 0-19 of 2026112522
    other = tmp_path / "elsewhere"
    other.mkdir()
    shifted = other / "part-010.msgpack"                   # claims 10-29 of the same seed
    shifted.write_bytes(part.read_bytes())
    out = tmp_path / "datasets"
    assert add_parts.main([str(part), str(shifted), "--datasets", str(out)]) == 1
    assert not out.exists()


def test_dry_run_writes_nothing(tmp_path, capsys):
    part = as_part(tmp_path, COMMITTED[1])
    out = tmp_path / "datasets"
    assert add_parts.main([str(part), "--datasets", str(out), "--dry-run"]) == 0
    assert "would write nvidia-h100-80gb/2026-11-26-mix2-2026112522-p000-019.msgpack.gz" in capsys.readouterr().out
    assert not out.exists()


@pytest.mark.parametrize("name, content, message", [
    ("part.msgpack", b"", "not a collect.sh part"),
    ("part-000.msgpack", b"\x93\x01\x02", "part-000.msgpack: "),
])
def test_bad_parts_are_refused_clearly(tmp_path, capsys, name, content, message):
    f = tmp_path / name
    f.write_bytes(content)
    assert add_parts.main([str(f), "--datasets", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert message in err and "nothing written" in err


def test_a_shard_of_another_kind_is_refused(tmp_path, capsys):
    lognormal = H100 / "2026-11-26-lognormal-2026112517-p00-09.msgpack.gz"
    f = tmp_path / "part-000.msgpack"
    f.write_bytes(gzip.decompress(lognormal.read_bytes()))
    assert add_parts.main([str(f), "--datasets", str(tmp_path / "d")]) == 1
    assert "is not the dataset mix's" in capsys.readouterr().err
