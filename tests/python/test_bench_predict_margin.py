"""bench/predict_aten_margin.py on a real dataset file with the shipped model: the replay of
predict mode's ATen-or-Triton choice is consistent with its own definitions."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_replay_table_is_consistent(tmp_path):
    model = ROOT / "python/torch_diode/bundles/nvidia-h100-80gb"
    model = max(model.iterdir(), key=lambda p: int(p.name))   # the shipped version
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
    model = ROOT / "python/torch_diode/bundles/nvidia-h100-80gb"
    model = max(model.iterdir(), key=lambda p: int(p.name))
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
    model = ROOT / "python/torch_diode/bundles/nvidia-h100-80gb"
    model = max(model.iterdir(), key=lambda p: int(p.name))
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench/predict_aten_margin.py"), "--model", str(model),
                        "--max-spread", "0.5", "--json", str(out), *data], capture_output=True, text=True, check=True)
    t = json.loads(out.read_text())
    assert t["max_spread"] == 0.5 and t["problems"] == len(kept) and "left out" in r.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "bench/predict_aten_margin.py"), "--model", str(model),
                          "--max-spread", "-1", *data], capture_output=True, text=True)
    assert bad.returncode != 0 and "--max-spread" in bad.stderr
