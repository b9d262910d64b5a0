"""bench/pick_retime.py without a GPU: the picks (model top-1, DEFAULT list + cuBLAS, best,
ATen), the derived ratios, the summary and --merge, and the whole driver with --dry-run (FAKE
timings) on the H100 test split, whose recorded figures must be exactly `diode validate`'s."""
import json
import pathlib
import subprocess
import sys

import pytest

from model_tools import DIODE, needs_model_tools, shipped_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import pick_retime as pr  # noqa: E402
from torch_diode.wire import KernelConfig, ShardRecord  # noqa: E402

SCRIPT = str(ROOT / "bench/pick_retime.py")
MODEL = shipped_model("nvidia-h100-80gb")
DATA = ROOT / "datasets/nvidia-h100-80gb"


def _rec(tmpl, bm, us, flags=0, status="ok"):
    cfg = KernelConfig(template=tmpl, block_m=bm, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=4)
    return ShardRecord(problem_index=0, config=cfg, median_us=us, status=status, flags=flags)


RECS = [
    _rec("aten", 0, 10.0, flags=pr.DEFAULT_FLAG),
    _rec("aten::bias_addmm", 0, 9.5, flags=pr.DEFAULT_FLAG),  # not the baseline's ATen: validate takes `aten`
    _rec("triton::mm", 32, 9.0, flags=pr.DEFAULT_FLAG),       # the DEFAULT list's best
    _rec("triton::mm", 64, 8.0),                              # the best of all, not in DEFAULT
    _rec("triton::mm", 128, 11.0),
    _rec("triton::mm", 256, 0.0, status="out_of_resources"),
]


def test_picks_follow_the_scores_and_the_records():
    # lowest score = the model's top-1 (ties to the first), here the 128 tile
    got = pr.picks(RECS, [5.0, 5.0, 3.0, 2.0, 1.0, 4.0])
    assert got["model"] is RECS[4]
    assert got["default"] is RECS[2] and got["best"] is RECS[3] and got["aten"] is RECS[0]
    tie = pr.picks(RECS, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert tie["model"] is RECS[0]
    # a top-1 that failed stays the pick; measure() reports it and times nothing
    failed = pr.picks(RECS, [5.0, 5.0, 3.0, 2.0, 1.0, 0.5])
    assert failed["model"] is RECS[5]


def test_aten_records_share_one_launch():
    assert pr.launch_key(RECS[0].config) == pr.launch_key(RECS[1].config) == "aten"
    assert pr.launch_key(RECS[2].config) != pr.launch_key(RECS[3].config)


def _row(op, rec_m, rec_d, rec_b, now_m, now_d, now_b, now_a, same=False, **kw):
    return pr.derive({"problem": op, "op": op, "dtype": "float16", "same_pick": same, "model_status": "ok",
                      "model_recorded_us": rec_m, "default_recorded_us": rec_d, "best_recorded_us": rec_b,
                      "aten_recorded_us": now_a, "model_now_us": now_m, "default_now_us": now_d,
                      "best_now_us": now_b, "aten_now_us": now_a, **kw})


def test_derive_recorded_and_fresh_ratios():
    # recorded: the baseline leads by 5%; now the model's pick is 2% faster than the baseline's
    r = _row("mm", 10.5, 10.0, 9.8, 9.8, 10.0, 10.1, 12.0)
    assert r["model_vs_default_recorded"] == pytest.approx(1.05)
    assert r["model_vs_default_now"] == pytest.approx(0.98)
    assert r["model_recorded_regret"] == pytest.approx(10.5 / 9.8)
    assert r["model_now_regret"] == pytest.approx(1.0) and r["default_now_regret"] == pytest.approx(10.0 / 9.8)
    assert r["model_vs_aten_now"] == pytest.approx(9.8 / 12.0)
    empty = pr.derive({"problem": "x", "model_recorded_us": None, "best_recorded_us": 1.0})
    assert empty["model_vs_default_now"] is None and empty["model_recorded_regret"] is None


def test_summary_groups_and_merge():
    rows = [_row("mm", 10.5, 10.0, 9.8, 9.8, 10.0, 10.1, 12.0),
            _row("bmm", 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 5.0, same=True),
            dict(_row("mm", 1.0, 1.0, 1.0, None, None, None, None), error="setup: boom")]
    sm = pr.summarize(rows, skipped=2)
    assert (sm["rows"], sm["usable"], sm["errors"], sm["skipped"]) == (3, 2, 1, 2)
    assert sm["groups"]["op mm"]["problems"] == 1 and sm["groups"]["op bmm"]["same_pick"] == 1
    assert sm["overall"]["model_vs_default_now"] == pytest.approx((0.98 * 1.0) ** 0.5)
    assert "| op mm | 1 | 0 | 1.050 | 0.980 |" in pr.markdown(sm, "dev")
    doc = pr.merge([{"rows": rows[:1], "skipped": 0, "device": "a", "model": "m"},
                    {"rows": rows[1:], "skipped": 2, "device": "a", "model": "m"}])
    assert doc["summary"] == sm
    with pytest.raises(ValueError):
        pr.merge([{"rows": [], "model": "m1"}, {"rows": [], "model": "m2"}])


@needs_model_tools
def test_dry_run_recorded_figures_are_diode_validates(tmp_path):
    """On the H100 test split with the shipped model, the script's recorded model top-1 regret
    is `diode validate`'s top-1 (the same picks), overall and per op; the DEFAULT baseline is
    within 0.5% of validate's (the DEFAULT flag here, tile matching there)."""
    split = tmp_path / "test.json"
    split.write_text(subprocess.run([str(DIODE), "validate", "--dataset", str(DATA), "--list-split", "test", "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    val = json.loads(subprocess.run([str(DIODE), "validate", "--model", str(MODEL), "--dataset", str(DATA),
                                     "--split", "test", "--json"], check=True, capture_output=True, text=True).stdout)
    out = tmp_path / "run.json"
    r = subprocess.run([sys.executable, SCRIPT, "--model", str(MODEL), "--data", str(DATA), "--split-list", str(split),
                        "--dry-run", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "FAKE" in r.stdout
    doc = json.loads(out.read_text())
    sm = doc["summary"]
    assert doc["fake"] is True and sm["rows"] == val["problems"] == sm["usable"]
    assert sm["overall"]["model_recorded_regret"] == pytest.approx(val["model"]["top1"]["geomean"], rel=1e-12)
    for op, g in val["model"]["per_op"].items():
        assert sm["groups"]["op " + op]["model_recorded_regret"] == pytest.approx(g["top1"]["geomean"], rel=1e-12)
    assert sm["overall"]["default_recorded_regret"] == pytest.approx(
        val["baselines"]["inductor_default"]["geomean"], rel=5e-3)
    # every row timed its distinct picks once each (FAKE: their records with 1% noise)
    for row in doc["rows"]:
        assert row["model_now_us"] == pytest.approx(row["model_recorded_us"], rel=0.05)
    # --count takes a slice, and two slices merge to the whole
    parts = []
    half = (sm["rows"] + 1) // 2   # the test split grows with the data: two slices of half of it
    for start in (0, half):
        part = tmp_path / f"part{start}.json"
        subprocess.run([sys.executable, SCRIPT, "--model", str(MODEL), "--data", str(DATA), "--split-list", str(split),
                        "--dry-run", "--start", str(start), "--count", str(half), "--json", str(part)],
                       check=True, capture_output=True, text=True, timeout=600)
        parts.append(str(part))
    merged = tmp_path / "merged.json"
    subprocess.run([sys.executable, SCRIPT, "--merge", *parts, "--json", str(merged)], check=True,
                   capture_output=True, text=True)
    m = json.loads(merged.read_text())["summary"]
    assert m["rows"] == sm["rows"]
    assert m["overall"]["model_recorded_regret"] == pytest.approx(sm["overall"]["model_recorded_regret"], rel=1e-12)


def test_without_a_gpu_it_says_so():
    r = subprocess.run([sys.executable, SCRIPT, "--model", str(MODEL), "--data",
                        str(DATA / "2026-11-25-mix-2026112507-p004-015.msgpack.gz")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "no CUDA GPU" in (r.stderr + r.stdout)
