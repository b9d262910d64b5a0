"""bench/top1_variants.py: the top-1 rule with an ATen margin, top-5, and on the H100 test split
the margin-0 figures of one model (given twice: the ensemble of a model with itself is the
model) must be exactly `diode validate`'s top-1 and top-5."""
import json
import pathlib
import subprocess
import sys

import pytest

from model_tools import DIODE, needs_model_tools, run, shipped_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import top1_variants as tv  # noqa: E402

SCRIPT = str(ROOT / "bench/top1_variants.py")
MODEL = shipped_model("nvidia-h100-80gb")
DATA = ROOT / "datasets/nvidia-h100-80gb"


def test_margin_hands_over_aten_unless_the_pick_is_predicted_faster_by_more():
    # candidates: ATen (index 0), a Triton config predicted 3% faster than ATen but measured 1.2x it
    times = [10.0, 12.0, 9.0]
    scores = [0.0, -0.03, 0.1]
    r = tv.regrets(scores, times, best=9.0, aten=0, margins=[0.0, 0.02, 0.05])
    assert r[0.0] == pytest.approx(12.0 / 9.0)   # plain lowest score
    assert r[0.02] == pytest.approx(12.0 / 9.0)  # log1p(0.02) < 0.03: still Triton
    assert r[0.05] == pytest.approx(10.0 / 9.0)  # within the margin: ATen
    assert r["top5"] == pytest.approx(1.0)       # the best is among the five


def test_ties_go_to_the_first_candidate_and_aten_as_top_pick_stays():
    r = tv.regrets([0.0, 0.0, 1.0], [10.0, 8.0, 9.0], best=8.0, aten=0, margins=[0.0, 0.1])
    assert r[0.0] == pytest.approx(10.0 / 8.0) and r[0.1] == pytest.approx(10.0 / 8.0)


@needs_model_tools
def test_margin_zero_is_diode_validates_top1_and_the_self_ensemble_is_the_model(tmp_path):
    split = tmp_path / "test.json"
    split.write_text(run(DIODE, "validate", "--dataset", DATA, "--list-split", "test", "--json"))
    val = json.loads(run(DIODE, "validate", "--model", MODEL, "--dataset", DATA, "--split", "test", "--json"))
    out = tmp_path / "figs.json"
    r = subprocess.run([sys.executable, SCRIPT, "--model", str(MODEL), "--model", str(MODEL), "--data", str(DATA),
                        "--split-list", str(split), "--margins", "0,0.05", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["problems"] == val["problems"]
    single = doc["results"][MODEL.name]
    assert single["top1@0"][0] == pytest.approx(val["model"]["top1"]["geomean"], rel=1e-9)
    assert single["top1@0"][1] == pytest.approx(val["model"]["top1"]["p90"], rel=1e-9)
    assert single["top5"][0] == pytest.approx(val["model"]["top5"]["geomean"], rel=1e-9)
    assert doc["results"]["ensemble (mean log time)"] == single
    assert single["top1@0.05"][0] != single["top1@0"][0]  # the margin changes some pick on this split


def test_margins_must_include_zero(tmp_path):
    r = subprocess.run([sys.executable, SCRIPT, "--model", str(MODEL), "--data", str(DATA), "--split-list",
                        str(tmp_path / "none.json"), "--margins", "0.05"], capture_output=True, text=True)
    assert r.returncode == 2 and "0 (validate's top-1)" in r.stderr
