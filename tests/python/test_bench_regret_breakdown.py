"""bench/regret_breakdown.py: the buckets, the groups' geomeans and shares on known rows, and
on the H100 test split the whole split's top-1 must be `diode validate`'s."""
import json
import math
import pathlib
import subprocess
import sys

import pytest

from model_tools import DIODE, needs_model_tools, run, shipped_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import regret_breakdown as rb  # noqa: E402

SCRIPT = str(ROOT / "bench/regret_breakdown.py")
MODEL = shipped_model("nvidia-h100-80gb")
DATA = ROOT / "datasets/nvidia-h100-80gb"


def test_buckets_take_the_first_bound_not_passed():
    assert [rb.bucket("k", v) for v in (16, 64, 65, 512, 4096, 4097)] == [
        "k<=64", "k<=64", "k<=512", "k<=512", "k<=4096", "k>4096"]
    assert rb.bucket("m", 1) == "m<=1" and rb.bucket("m", 2) == "m<=16"


def test_groups_geomean_and_share_of_the_log_regret():
    rows = [({"op": "bmm"}, 1.10), ({"op": "bmm"}, 1.00), ({"op": "mm"}, 1.21)]
    g = rb.breakdown(rows)["op"]
    assert list(g) == ["mm", "bmm"]                                # largest share first
    assert g["bmm"]["problems"] == 2 and g["bmm"]["top1"] == pytest.approx(math.sqrt(1.1))
    total = math.log(1.1) + math.log(1.21)
    assert g["mm"]["share"] == pytest.approx(math.log(1.21) / total)
    assert g["mm"]["share"] + g["bmm"]["share"] == pytest.approx(1.0)


@needs_model_tools
def test_the_whole_split_is_diode_validates_top1(tmp_path):
    split = tmp_path / "test.json"
    split.write_text(run(DIODE, "validate", "--dataset", DATA, "--list-split", "test", "--json"))
    val = json.loads(run(DIODE, "validate", "--model", MODEL, "--dataset", DATA, "--split", "test", "--json"))
    out = tmp_path / "rb.json"
    r = subprocess.run([sys.executable, SCRIPT, "--model", str(MODEL), "--data", str(DATA),
                        "--split-list", str(split), "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["problems"] == val["problems"]
    assert doc["top1"] == pytest.approx(val["model"]["top1"]["geomean"], rel=1e-9)
    for axis, groups in doc["groups"].items():
        assert sum(g["problems"] for g in groups.values()) == doc["problems"], axis
        assert sum(g["share"] for g in groups.values()) == pytest.approx(1.0), axis
