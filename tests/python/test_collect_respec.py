"""torch_diode.collect.respec: a spec of the committed problems whose newest measuring collector
is older than a version (the trainer's newest-version rule), which collect.sh runs and
datasets/add_parts.py files as a re-collection."""
import dataclasses
import gzip
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "datasets"))

import add_parts  # noqa: E402
from torch_diode import wire  # noqa: E402
from torch_diode.collect import respec  # noqa: E402
from torch_diode.collect.spec import load_spec  # noqa: E402
from torch_diode.dataset import load_dataset  # noqa: E402

H100 = ROOT / "datasets/nvidia-h100-80gb"
# A few files of it, each collector era once, so the tests load in seconds: the fleet run's
# (2.0.0: mm 184x16x408 bf16 and its disturbed record), a log-normal seed's (2.0.0: addmm
# 8192x96x32 bf16), a mix seed's under 2.1.0, and a 2.5.0 part that drew that addmm again.
FILES = ("2026-11-25-fleet-mix-2026112505-s000-006.msgpack.gz",
         "2026-11-25-lognormal-2026112503-p00-18.msgpack.gz",
         "2026-11-25-mix-2026112507-p000-003.msgpack.gz",
         "2026-11-26-mix2-2026112522-p020-056.msgpack.gz")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("h100")
    for f in FILES:
        (d / f).symlink_to(H100 / f)
    return d


def test_stale_problems_follow_the_newest_collector_of_each_problem(data):
    stale = respec.stale_problems(str(data), (2, 2, 0))
    newest = {}
    for s in load_dataset(str(data)).shards:
        v = respec.version_of(s.method.collector)
        for p, rs in s.records_by_problem():
            if rs:
                newest[p] = max(newest.get(p, v), v)
    assert stale == [p for p in dict.fromkeys(stale)]          # no problem twice
    assert set(stale) == {p for p, v in newest.items() if v < (2, 2, 0)}
    assert len(stale) > 20 and {respec.version_of(s.method.collector) for s in load_dataset(str(data)).shards} == {
        (2, 0, 0), (2, 1, 0), (2, 5, 0)}
    shapes = {(p.op, p.m, p.n, p.k, p.dtype_a) for p in stale}
    assert ("mm", 184, 16, 408, "bfloat16") in shapes           # the disturbed fleet record's problem
    # drawn by a 2.0.0 seed and again by a 2.5.0 one: already re-measured, not drawn again
    assert ("addmm", 8192, 96, 32, "bfloat16") not in shapes
    assert respec.stale_problems(str(data), (2, 0, 0)) == []


def test_spec_is_written_loadable_and_limited(tmp_path, capsys, data):
    out = tmp_path / "collect-2026990001" / "spec.json"
    assert respec.main(["--dataset", str(data), "--before", "2.1.0", "--id", "2026990001",
                        "--out", str(out), "--limit", "7"]) == 0
    spec = load_spec(str(out))
    assert spec.shard_id == "dataset-recollect/2026990001" and spec.search_space == "EXHAUSTIVE"
    assert spec.tf32 == (True,)
    assert list(spec.problems) == respec.stale_problems(str(data), (2, 1, 0))[:7]
    assert "7 problems" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--before", "2.2"], "MAJOR.MINOR.PATCH"),
    (["--before", "2.2.0", "--id", "abc"], "digits only"),
    (["--before", "2.2.0", "--limit", "-1"], "--limit"),
    (["--before", "2.2.0", "--part", "2/2"], "0 <= K < N"),
    (["--before", "2.2.0", "--part", "half"], "expected K/N"),
])
def test_bad_arguments_are_refused(tmp_path, capsys, args, message):
    base = {"--dataset": str(H100), "--id": "2026990001", "--out": str(tmp_path / "s.json")}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    with pytest.raises(SystemExit):
        respec.main([x for kv in base.items() for x in kv])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()


def test_nothing_stale_writes_nothing(tmp_path, data):
    out = tmp_path / "s.json"
    assert respec.main(["--dataset", str(data), "--before", "2.0.0", "--id", "1", "--out", str(out)]) == 1
    assert not out.exists()


def test_add_parts_files_a_recollection_part(tmp_path, capsys):
    committed = H100 / "2026-11-26-mix2-2026112522-p000-019.msgpack.gz"
    shard = wire.decode(gzip.decompress(committed.read_bytes()), expect="shard")
    recollected = wire.seal(dataclasses.replace(shard, id="dataset-recollect/2026990001"))
    part = tmp_path / "part-000.msgpack"
    part.write_bytes(wire.encode(recollected))
    out = tmp_path / "datasets"
    assert add_parts.main([str(part), "--datasets", str(out)]) == 0
    assert (out / "nvidia-h100-80gb" / "2026-11-26-recollect-2026990001-p000-019.msgpack.gz").exists()


def test_parts_are_disjoint_and_cover_every_stale_problem(tmp_path, data):
    got = []
    for k in range(3):
        out = tmp_path / f"s{k}.json"
        assert respec.main(["--dataset", str(data), "--before", "2.2.0", "--id", str(2026990010 + k),
                            "--part", f"{k}/3", "--out", str(out)]) == 0
        got.append(list(load_spec(str(out)).problems))
    every = respec.stale_problems(str(data), (2, 2, 0))
    assert sorted(map(len, got)) == sorted(len(every[k::3]) for k in range(3))
    assert [p for part in got for p in part] != every          # interleaved, not cut in blocks
    assert sorted(map(repr, (p for part in got for p in part))) == sorted(map(repr, every))


def test_since_keeps_the_band_between_since_and_before(tmp_path, data):
    # the fixture's versions are 2.0.0, 2.1.0 and 2.5.0: --since 2.1.0 --before 2.5.0 is the 2.1.0
    # band, disjoint from --before 2.1.0, and the two together are --before 2.5.0 (the H100 re-collection's split)
    oldest = respec.stale_problems(str(data), (2, 1, 0))
    band = respec.stale_problems(str(data), (2, 5, 0), since=(2, 1, 0))
    assert oldest and band and not set(oldest) & set(band)
    assert sorted(map(repr, oldest + band)) == sorted(map(repr, respec.stale_problems(str(data), (2, 5, 0))))
    out = tmp_path / "s.json"
    assert respec.main(["--dataset", str(data), "--before", "2.5.0", "--since", "2.1.0", "--id", "7",
                        "--part", "1/2", "--out", str(out)]) == 0
    assert list(load_spec(str(out)).problems) == band[1::2]


@pytest.mark.parametrize("args, message", [
    (["--since", "2.5.0"], "must be below --before"),
    (["--since", "x"], "--since 'x'"),
])
def test_bad_since_is_refused(tmp_path, capsys, data, args, message):
    with pytest.raises(SystemExit):
        respec.main(["--dataset", str(data), "--before", "2.2.0", "--id", "1", "--out", str(tmp_path / "s.json"), *args])
    assert message in capsys.readouterr().err


def test_model_top_goes_into_the_spec(tmp_path, capsys, data):
    model = ROOT / "python/torch_diode/bundles/nvidia-h100-80gb"
    model = sorted((d for d in model.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))[-1]
    out = tmp_path / "s.json"
    assert respec.main(["--dataset", str(data), "--before", "2.2.0", "--id", "8", "--limit", "2",
                        "--model-top", "5", "--model", str(model), "--out", str(out)]) == 0
    spec = load_spec(str(out))
    assert spec.timing.model_top == 5 and spec.timing.model == str(model) and spec.timing.extra_models == ()
    # a candidate beside the shipped model (--also-model): both models' picks are timed
    other = ROOT / "python/torch_diode/bundles/nvidia-h200-144gb"
    other = sorted((d for d in other.iterdir() if d.name.isdigit()), key=lambda d: int(d.name))[-1]
    assert respec.main(["--dataset", str(data), "--before", "2.2.0", "--id", "8", "--limit", "2", "--model-top", "5",
                        "--model", str(model), "--also-model", str(other), "--out", str(out)]) == 0
    assert load_spec(str(out)).timing.extra_models == (str(other),)
    for args, message in ((["--model-top", "5"], "give both"), (["--model-top", "5", "--model", str(tmp_path)],
                                                                "no model.json"),
                          (["--model-top", "5", "--model", str(model), "--also-model", str(tmp_path)],
                           "--also-model " + str(tmp_path) + ": no model.json"),
                          (["--also-model", str(other)], "extra_models: needs model and model_top")):
        with pytest.raises(SystemExit):
            respec.main(["--dataset", str(data), "--before", "2.2.0", "--id", "9", "--out", str(tmp_path / "t.json"),
                         *args])
        assert message in capsys.readouterr().err


def test_split_list_keeps_only_its_problems(tmp_path, data):
    every = respec.stale_problems(str(data), (2, 5, 0))
    chosen = every[1::3]
    listed = tmp_path / "test.json"
    listed.write_text(json.dumps([{**wire.to_json(p), "problem": "x", "configs": 1} for p in chosen]))
    out = tmp_path / "s.json"
    assert respec.main(["--dataset", str(data), "--before", "2.5.0", "--id", "10", "--split-list", str(listed),
                        "--out", str(out)]) == 0
    assert list(load_spec(str(out)).problems) == chosen
    listed.write_text("{}")
    with pytest.raises(SystemExit, match="expected the JSON list"):
        respec.main(["--dataset", str(data), "--before", "2.5.0", "--id", "11", "--split-list", str(listed),
                     "--out", str(out)])
