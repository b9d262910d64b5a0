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
