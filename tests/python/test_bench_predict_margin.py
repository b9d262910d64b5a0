"""bench/predict_aten_margin.py on a real dataset file with the shipped model: the replay of
predict mode's ATen-or-Triton choice is consistent with its own definitions."""
import json
import pathlib
import subprocess
import sys

from model_tools import shipped_model

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_replay_table_is_consistent(tmp_path):
    model = shipped_model("nvidia-h100-80gb")
    data = ROOT / "datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p004-015.msgpack.gz"
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench/predict_aten_margin.py"), "--model", str(model),
                        "--json", str(out), str(data)], capture_output=True, text=True, check=True)
    t = json.loads(out.read_text())
    rows = {row["margin"]: row for row in t["table"]}
    n = t["problems"]
    assert n >= 10 and f"{n} problems" in r.stdout
    only = rows[None]                       # cuBLAS only: ATen everywhere, 1.0 against itself
    assert only["aten_chosen"] == n and only["vs_cublas_geomean"] == 1.0 and only["vs_cublas_max"] == 1.0
    margins = sorted(m for m in rows if m is not None)
    chosen = [rows[m]["aten_chosen"] for m in margins]
    assert chosen == sorted(chosen)         # a larger margin never chooses ATen less often
    for row in t["table"]:
        assert 1.0 <= row["regret_geomean"] <= row["regret_max"]   # nothing beats the best measured


def test_split_list_keeps_only_the_listed_problems_and_groups_them(tmp_path):
    """--split-list (a `diode validate --list-split --json` file) restricts the replay to its
    problems, and the per-op / per-dtype rows at margin 0 add up to them."""
    sys.path.insert(0, str(ROOT / "python"))
    sys.path.insert(0, str(ROOT / "bench"))
    import dataclasses
    import predict_aten_margin as pam
    from torch_diode.dataset import load_dataset
    model = shipped_model("nvidia-h100-80gb")
    data = ROOT / "datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p004-015.msgpack.gz"
    every = [p for p, _ in pam.problems_of([str(data)])]
    listed = every[::3]
    assert 2 <= len(listed) < len(every)
    # the list file carries more fields than the key (configs, times); only the key matters
    lst = tmp_path / "split.json"
    lst.write_text(json.dumps([dict(dataclasses.asdict(p), configs=[], us=[], problem="0" * 16) for p in listed]))
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench/predict_aten_margin.py"), "--model", str(model),
                        "--split-list", str(lst), "--json", str(out), str(data)],
                       capture_output=True, text=True, check=True)
    t = json.loads(out.read_text())
    assert t["problems"] == len({pam.problem_key(p) for p in listed}) and f"{t['problems']} problems" in r.stdout
    ops = {k: v for k, v in t["per_group"].items() if k.startswith("op ")}
    dtypes = {k: v for k, v in t["per_group"].items() if k.startswith("dtype ")}
    assert sum(v["problems"] for v in ops.values()) == t["problems"]
    assert sum(v["problems"] for v in dtypes.values()) == t["problems"]
    assert set(ops) == {"op " + p.op for p in listed}
    for v in t["per_group"].values():
        assert v["predict_regret_geomean"] >= 1.0 and v["cublas_regret_geomean"] >= 1.0
        assert v["predict_vs_cublas_geomean"] <= v["predict_vs_cublas_max"]
    # a file that is not a list of problems is refused with a clear message
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"problems": 3}))
    r = subprocess.run([sys.executable, str(ROOT / "bench/predict_aten_margin.py"), "--model", str(model),
                        "--split-list", str(bad), str(data)], capture_output=True, text=True)
    assert r.returncode != 0 and "--list-split" in r.stderr


def test_max_spread_leaves_out_disturbed_records_as_validate_does(tmp_path):
    """--max-spread F replays as if every ok record with spread > F x median had never been timed
    (diode validate's and diode-train's rule): no record the replay uses is disturbed, and on the
    fleet file (collector 2.0.0, disturbed DEFAULT records such as mm 184x16x408 bf16's 45.6 us
    with a 35 us IQR) some are left out; F = 0 keeps the data as measured."""
    sys.path.insert(0, str(ROOT / "bench"))
    import predict_aten_margin as pam
    data = [str(ROOT / "datasets/nvidia-h100-80gb/2026-11-25-fleet-mix-2026112505-s000-006.msgpack.gz")]
    raw = {pam.problem_key(p): rs for p, rs in pam.problems_of(data)}
    kept = {pam.problem_key(p): rs for p, rs in pam.problems_of(data, max_spread=0.5)}
    assert kept and set(kept) <= set(raw)
    assert all(r.spread_us <= 0.5 * r.median_us for rs in kept.values() for r in rs)
    assert sum(map(len, kept.values())) < sum(map(len, raw.values()))
    assert any(r.spread_us > 0.5 * r.median_us for rs in raw.values() for r in rs)
    model = shipped_model("nvidia-h100-80gb")
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench/predict_aten_margin.py"), "--model", str(model),
                        "--max-spread", "0.5", "--json", str(out), *data], capture_output=True, text=True, check=True)
    t = json.loads(out.read_text())
    assert t["max_spread"] == 0.5 and t["problems"] == len(kept) and "left out" in r.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "bench/predict_aten_margin.py"), "--model", str(model),
                          "--max-spread", "-1", *data], capture_output=True, text=True)
    assert bad.returncode != 0 and "--max-spread" in bad.stderr


def test_aten_margin_choice_takes_the_smallest_margin_within_the_bound(tmp_path):
    """bench/aten_margin_choice.py: the same replay per case as predict_aten_margin.py (one
    definition), side by side, and the smallest margin of the grid whose worst GEMM is within
    --bound x cuBLAS in every case."""
    sys.path.insert(0, str(ROOT / "python"))
    sys.path.insert(0, str(ROOT / "bench"))
    import dataclasses
    import aten_margin_choice as amc
    import predict_aten_margin as pam
    from torch_diode.model import load_model_dir
    h100 = shipped_model("nvidia-h100-80gb")
    data = ROOT / "datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p004-015.msgpack.gz"
    every = [p for p, _ in pam.problems_of([str(data)])]
    lists = {}
    for name, probs in (("all", every), ("odd", every[1::2])):
        lists[name] = tmp_path / f"{name}.json"
        lists[name].write_text(json.dumps([dict(dataclasses.asdict(p), configs=[], us=[], problem="0" * 16)
                                           for p in probs]))
    out = tmp_path / "choice.json"
    cmd = [sys.executable, str(ROOT / "bench/aten_margin_choice.py"), "--json", str(out),
           "--case", "all", str(h100), str(data), str(lists["all"]),
           "--case", "odd", str(h100), str(data), str(lists["odd"])]
    r = subprocess.run(cmd + ["--bound", "1.5"], capture_output=True, text=True)
    t = json.loads(out.read_text())
    # the tables are predict_aten_margin's rows, recomputed here
    rows = pam.replay_rows(load_model_dir(str(h100)), [str(data)], pam.read_split_list(str(lists["odd"])), 0.5)
    assert t["tables"]["odd"] == [pam.margin_row(rows, m) for m in pam.MARGINS]
    assert t["problems"] == {"all": len(every), "odd": len(rows)}
    # the choice: smallest grid margin with every case's worst within the bound
    expect = next((m for i, m in enumerate(pam.MARGINS)
                   if all(tab[i]["vs_cublas_max"] <= 1.5 for tab in t["tables"].values())), None)
    assert t["chosen"] == expect == amc.choose(t["tables"], 1.5)
    assert (r.returncode == 0) == (expect is not None), r.stdout + r.stderr
    # a bound no margin meets below 0.5 on these problems: exit 1 and no choice, said so
    worst_at_largest = max(tab[-1]["vs_cublas_max"] for tab in t["tables"].values())
    if worst_at_largest > 1.0:
        r = subprocess.run(cmd + ["--bound", "1.0"], capture_output=True, text=True)
        assert r.returncode == 1 and "no margin of the grid" in r.stdout
        assert json.loads(out.read_text())["chosen"] is None
    bad = subprocess.run(cmd[:4] + ["--case", "all", str(h100), str(data), str(lists["odd"]),
                                    "--case", "all", str(h100), str(data), str(lists["all"])],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "labels must differ" in bad.stderr


def test_a_problem_in_two_shards_is_one_problem_grouped_as_diode_validate_does(tmp_path):
    """problems_of() groups a problem held by two shards as models/src/problem_set.h does: the
    newest collector's shards only, a config's repeated ok medians by geometric mean."""
    sys.path.insert(0, str(ROOT / "python"))
    sys.path.insert(0, str(ROOT / "bench"))
    import dataclasses
    import math
    import predict_aten_margin as pam
    from torch_diode import wire
    from torch_diode.dataset import load_dataset
    src = ROOT / "datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p004-015.msgpack.gz"
    shard = load_dataset(str(src)).shards[0]
    p0, recs0 = next(iter(shard.records_by_problem()))
    one = dataclasses.replace(shard, problems=[p0], records=[dataclasses.replace(r, problem_index=0) for r in recs0],
                              problem_wall_s=shard.problem_wall_s[:1])

    def write(name, s):
        (tmp_path / name).write_bytes(wire.encode(wire.seal(s)))
        return str(tmp_path / name)

    slower = dataclasses.replace(one, id=one.id + "-again", records=[dataclasses.replace(r, median_us=r.median_us * 4)
                                                                     for r in one.records])
    a, b = write("a.msgpack", one), write("b.msgpack", slower)
    (only,) = list(pam.problems_of([a]))
    (both,) = list(pam.problems_of([a, b]))
    assert pam.problem_key(both[0]) == pam.problem_key(only[0])
    assert [r.config for r in both[1]] == [r.config for r in only[1]]
    for x, y in zip(only[1], both[1]):
        assert math.isclose(y.median_us, x.median_us * 2, rel_tol=1e-9)   # sqrt(1 x 4)
    # a newer collector's shard replaces the older one's records
    newer_method = dataclasses.replace(slower.method, collector="torch_diode.collect 9.0.0")
    c = write("c.msgpack", dataclasses.replace(slower, id=one.id + "-newer", method=newer_method))
    (newest,) = list(pam.problems_of([a, c]))
    for x, y in zip(only[1], newest[1]):
        assert math.isclose(y.median_us, x.median_us * 4, rel_tol=1e-9)
