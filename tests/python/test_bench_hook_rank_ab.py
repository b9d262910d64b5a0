"""bench/hook_rank_ab.py: the package at a git revision ranks beside the working tree's in one
process; at HEAD with one model both sides must give the same results (exit 0, no mismatch),
and the table has every row."""
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")
ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "hook_rank_ab.py"


def _shipped(hw: str) -> pathlib.Path:
    d = ROOT / "python" / "torch_diode" / "bundles" / hw
    return max((p for p in d.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def test_same_revision_same_model_gives_the_same_results():
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    r = subprocess.run([sys.executable, str(SCRIPT), "--base", "HEAD", "--model", str(_shipped("nvidia-h200-144gb")),
                        "--problems", "4"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "results differ on 0 problems" in r.stdout
    rows = [l.split("|")[1].strip() for l in r.stdout.splitlines() if l.startswith("| ") and "median" not in l]
    assert rows == ["miss", "fwd", "nonfwd", "hit"], r.stdout


def test_a_bad_revision_is_a_clear_error():
    r = subprocess.run([sys.executable, str(SCRIPT), "--base", "no-such-revision-x", "--model",
                        str(_shipped("nvidia-h200-144gb"))], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "no-such-revision-x" in r.stderr
