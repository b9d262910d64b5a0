"""torch_diode.tools.manifest_remainder: the rest of a sweep as a new, valid manifest."""
from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from torch_diode.tools import manifest_remainder as mr

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("DIODE_BUILD_DIR") or ROOT / "build")
FP8 = ROOT / "manifests/h200-fp8-2026112904.yaml"
FP8_DATA = ROOT / "datasets/nvidia-h200-144gb/2026-11-29-fleet-fp8-2026112904-s000-005.msgpack.gz"


def test_the_committed_fp8_sweeps_remainder(tmp_path):
    yaml = pytest.importorskip("yaml")
    out = tmp_path / "r1.yaml"
    assert mr.main([str(FP8), str(FP8_DATA), "--name", "h200-fp8-r1", "--problems-per-shard", "24",
                    "--out", str(out)]) == 0
    new = yaml.safe_load(out.read_text())
    old = yaml.safe_load(FP8.read_text())
    left = new["sweep"]["shapes"]["list"]
    # 72 problems (shards 0-5 of 12) are in the dataset: exactly the first 72 listed
    assert new["sweep"]["problems"] == len(left) == 288
    assert left == old["sweep"]["shapes"]["list"][72:]
    assert new["name"] == "h200-fp8-r1" and new["sweep"]["problems_per_shard"] == 24
    assert new["hardware"] == old["hardware"] and new["sweep"]["timing"] == old["sweep"]["timing"]
    diode = BUILD / "cli" / "diode"
    if not diode.exists():
        if os.environ.get("DIODE_REQUIRE_BUILD"):
            pytest.fail(f"{diode} not built")
        return
    r = subprocess.run([str(diode), "manifest", "validate", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "288 problems in 12 shards of 24" in r.stdout


def test_only_a_problem_list_has_a_remainder(tmp_path):
    pytest.importorskip("yaml")
    out = tmp_path / "x.yaml"
    assert mr.main([str(ROOT / "manifests/h200.yaml"), str(FP8_DATA), "--name", "x", "--out", str(out)]) == 1
    assert not out.exists()


def test_nothing_left_is_an_error():
    sweep = {"problems": 1, "shapes": {"distribution": "problems",
                                       "list": [{"op": "mm", "dtype": "float16", "m": 8, "n": 8, "k": 8}]}}
    held = {("mm", 1, 8, 8, 8, "float16", "float16", "float16", False, False, "none", "none")}
    with pytest.raises(mr.RemainderError, match="nothing is left"):
        mr.remainder({"name": "a", "sweep": sweep}, held, "b", None)
    new, n_held = mr.remainder({"name": "a", "sweep": sweep}, set(), "b", None)
    assert n_held == 0 and new["sweep"]["problems"] == 1 and new["name"] == "b"
