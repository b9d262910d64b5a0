"""bench/prefilter_recall.py on one real dataset file: the ensemble on every candidate is
diode validate's ranking, and a pre-filter that keeps every candidate changes no pick."""
import dataclasses
import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from model_tools import shipped_model  # noqa: E402
from test_hook_model import write_model_dir  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p004-015.msgpack.gz"


def test_keep_everything_is_the_full_ranking_and_a_small_keep_can_only_lose(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import predict_aten_margin as pam
    import top1_variants
    from torch_diode.model import load_model_dir
    problems = list(pam.problems_of([str(DATA)], max_spread=0.5))
    split = tmp_path / "split.json"
    split.write_text(json.dumps([dict(dataclasses.asdict(p), configs=[], us=[], problem="0" * 16)
                                 for p, _ in problems]))
    write_model_dir(tmp_path / "tiny", hidden=4, blocks=0)
    out = tmp_path / "out.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench/prefilter_recall.py"), "--model",
                        str(shipped_model("nvidia-h100-80gb")), "--prefilter", str(tmp_path / "tiny"),
                        "--data", str(DATA), "--split-list", str(split), "--keep", "1,100000",
                        "--json", str(out), "--time-rows", "64", "--repeat", "3"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    t = json.loads(out.read_text())
    n = t["problems"]
    assert n == len(problems) >= 10 and f"{n} problems" in r.stdout
    rows = t["rows"]
    # keeping every candidate is the ensemble on everything: the same picks, the same regret
    assert rows["keep 100000"]["same_pick"] == n
    assert rows["keep 100000"]["top1"] == rows["all"]["top1"]
    # and that is top1_variants' (validate's) top-1 of the same model on the same problems
    ref = top1_variants.evaluate([("m", load_model_dir(str(shipped_model("nvidia-h100-80gb"))))], problems, [0.0])
    assert rows["all"]["top1"]["geomean"] == pytest.approx(ref["m"]["top1@0"][0], rel=1e-9)
    # the forwards were timed side by side: now, each K, the pre-filter alone
    assert set(t["forward_ms"]) == {"now", "keep 1", "keep 100000", "prefilter alone"}
    assert all(v > 0 for v in t["forward_ms"].values()) and "ratio to now" in r.stdout
    # keeping one Triton config (and ATen) can only lose against the best measured
    assert rows["keep 1"]["top1"]["geomean"] >= 1.0 and rows["keep 1"]["same_pick"] <= n
    bad = subprocess.run([sys.executable, str(ROOT / "bench/prefilter_recall.py"), "--model", "x",
                          "--prefilter", "y", "--data", "z", "--split-list", str(split), "--keep", "0"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "--keep" in bad.stderr


def test_miss_timing_runs_every_model_on_the_same_problems():
    """--joined's timing: the hook's cache-miss path of each model, interleaved (the golden
    ensemble without and with its pre-filter: any two models of one feature spec)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import prefilter_recall
    from torch_diode.model import load_model_dir
    plain, joined = load_model_dir(ROOT / "tests/golden/ensemble"), load_model_dir(ROOT / "tests/golden/prefilter")
    out = prefilter_recall.miss_ms({"without": plain, "with pre-filter": joined}, problems=2, repeat=1)
    assert set(out) == {"without", "with pre-filter"}
    assert all(0 < median <= p90 for median, p90 in out.values())
