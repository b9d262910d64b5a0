"""bench/collection_rate.py: rates from the shards' own per-problem wall seconds, groups side
by side, and a clear refusal of shards that carry no wall seconds."""
import dataclasses
import gzip
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import collection_rate  # noqa: E402
from torch_diode import wire  # noqa: E402

H100 = ROOT / "datasets/nvidia-h100-80gb"
ONE = [H100 / "2026-11-26-mix2-2026112518-p000-029.msgpack.gz",
       H100 / "2026-11-26-mix2-2026112518-p030-044.msgpack.gz"]
FOUR = [H100 / f"2026-11-26-mix2-{s}.msgpack.gz" for s in
        ("2026112518-p045-063", "2026112520-p000-020", "2026112521-p000-030", "2026112522-p000-019")]


def _shard(path):
    return wire.decode(gzip.decompress(path.read_bytes()), expect="shard")


def test_group_rate_is_problems_over_recorded_seconds():
    shards = [_shard(p) for p in ONE]
    problems = sum(len(s.problems) for s in shards)
    walls = [w for s in shards for w in s.problem_wall_s]
    r = collection_rate.group_rate("one", 1, [str(p) for p in ONE])
    assert r["problems"] == problems == 45
    assert r["recorded_s"] == pytest.approx(sum(walls))
    assert r["per_gpu_hour"] == pytest.approx(problems / sum(walls) * 3600)
    assert r["per_machine_hour"] == r["per_gpu_hour"]
    r4 = collection_rate.group_rate("four", 4, [str(p) for p in FOUR])
    assert r4["problems"] == 91
    assert r4["per_machine_hour"] == pytest.approx(4 * r4["per_gpu_hour"])
    assert min(walls) <= r["median_s"] <= r["p90_s"] <= max(walls)


def test_cli_prints_each_group_with_ratios_to_the_first():
    out = subprocess.run([sys.executable, str(ROOT / "bench/collection_rate.py"),
                          "--group", "one GPU", "1", *map(str, ONE),
                          "--group", "four GPUs", "4", *map(str, FOUR)],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    one = next(l for l in lines if l.startswith("one GPU"))
    four = next(l for l in lines if l.startswith("four GPUs"))
    assert one.split()[-2:] == ["1.00", "1.00"]
    r1 = collection_rate.group_rate("", 1, [str(p) for p in ONE])
    r4 = collection_rate.group_rate("", 4, [str(p) for p in FOUR])
    per_gpu, per_machine = (float(x) for x in four.split()[-2:])
    assert per_gpu == pytest.approx(r4["per_gpu_hour"] / r1["per_gpu_hour"], abs=0.006)
    assert per_machine == pytest.approx(4 * per_gpu, abs=0.03)


def test_shard_without_wall_seconds_is_refused(tmp_path):
    s = _shard(ONE[0])
    bare = dataclasses.replace(s, problem_wall_s=())
    f = tmp_path / "bare.msgpack"
    f.write_bytes(wire.encode(wire.seal(bare)))
    with pytest.raises(SystemExit, match="no rate"):
        collection_rate.group_rate("bare", 1, [str(f)])


@pytest.mark.parametrize("argv, message", [
    ([], "usage"),
    (["x.gz"], "expected --group"),
    (["--group", "a"], "needs LABEL GPUS"),
    (["--group", "a", "two", "x.gz"], "GPUS must be an integer"),
    (["--group", "a", "0", "x.gz"], "at least 1"),
    (["--group", "a", "1"], "no files"),
])
def test_bad_arguments_are_refused_clearly(argv, message):
    with pytest.raises(SystemExit, match=message):
        collection_rate.parse_groups(argv)
