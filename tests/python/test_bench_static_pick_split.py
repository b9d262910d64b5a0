"""bench/static_pick_split.py: the split of a model's top-1 regret by the kind of record its
pick has (static-shape or ATen, against runtime-size only); over all problems it must be
exactly `diode validate`'s top-1 on the H100 test split."""
import json
import pathlib
import subprocess
import sys

import pytest

from model_tools import DIODE, needs_model_tools, run, shipped_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import static_pick_split as sps  # noqa: E402
from torch_diode.collect.engine import FLAG_STATIC  # noqa: E402
from torch_diode.wire import KernelConfig, Problem, TimingRecord  # noqa: E402

SCRIPT = str(ROOT / "bench/static_pick_split.py")
DATA = ROOT / "datasets/nvidia-h100-80gb"


def rec(template="triton::mm", bm=64, stages=3, flags=0, us=10.0):
    cfg = KernelConfig(template=template, block_m=bm, block_n=64, block_k=32, num_stages=stages, num_warps=4)
    return TimingRecord(problem=Problem(op="mm", m=64, n=64, k=64), config=cfg, median_us=us, repeats=10,
                        flags=flags)


def test_records_timed_as_compiled_are_static_triton_or_aten():
    assert sps.timed_as_compiled(rec(flags=FLAG_STATIC))
    assert sps.timed_as_compiled(rec(template="aten"))
    assert not sps.timed_as_compiled(rec())
    assert sps.tile(rec(stages=1).config) == sps.tile(rec(stages=4).config)
    assert sps.tile(rec(bm=128).config) != sps.tile(rec().config)


def test_summary_splits_the_geomean_and_substitutes_the_same_tile():
    rows = [{"regret": 1.0, "compiled": True, "best_compiled": True, "same_tile_static": None},
            {"regret": 1.21, "compiled": False, "best_compiled": True, "same_tile_static": 1.0},
            {"regret": 1.44, "compiled": False, "best_compiled": False, "same_tile_static": None}]
    s = sps.summary(rows)
    assert s["problems"] == 3 and s["best_is_compiled"] == 2
    assert s["compiled"] == {"problems": 1, "top1": pytest.approx(1.0)}
    rt = s["runtime_size"]
    assert rt["problems"] == 2 and rt["top1"] == pytest.approx((1.21 * 1.44) ** 0.5)
    assert rt["with_same_tile_static"] == 1 and rt["same_tile_static_best"] == pytest.approx(1.0)
    assert rt["top1_if_same_tile_static"] == pytest.approx(1.44 ** 0.5)
    assert s["top1"] == pytest.approx((1.21 * 1.44) ** (1 / 3))
    assert s["top_picks"] == 0 and s["top_picks_compiled"] == 0   # rows without the top-k count
    rows = [dict(r, top=10, top_compiled=c) for r, c in zip(rows, (10, 3, 0))]
    s = sps.summary(rows)
    assert s["top_picks"] == 30 and s["top_picks_compiled"] == 13


def test_uncompiled_top_keeps_the_problems_a_recollection_changes():
    a, b, c = (Problem(op="mm", m=m, n=64, k=64) for m in (16, 32, 64))
    rows = [{"problem": a, "top": 10, "top_compiled": 10},   # every pick timed as compiled
            {"problem": b, "top": 10, "top_compiled": 9},    # one runtime-size-only pick
            {"problem": c, "top": 3, "top_compiled": 3}]     # fewer records than TOP, all compiled
    assert sps.uncompiled_top(rows) == {sps.problem_key(b)}
    assert sps.summary([dict(r, regret=1.0, compiled=True, best_compiled=True, same_tile_static=None)
                        for r in rows])["problems_top_uncompiled"] == 1


@needs_model_tools
def test_all_problems_is_diode_validates_top1(tmp_path):
    model = shipped_model("nvidia-h100-80gb")
    split = tmp_path / "test.json"
    split.write_text(run(DIODE, "validate", "--dataset", DATA, "--list-split", "test", "--json"))
    val = json.loads(run(DIODE, "validate", "--model", model, "--dataset", DATA, "--split", "test", "--json"))
    out, sub = tmp_path / "s.json", tmp_path / "uncompiled.json"
    r = subprocess.run([sys.executable, SCRIPT, "--model", str(model), "--split-list", str(split), str(DATA),
                        "--json", str(out), "--uncompiled-list", str(sub)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(out.read_text())
    assert s["problems"] == val["problems"]
    assert s["top1"] == pytest.approx(val["model"]["top1"]["geomean"], rel=1e-9)
    assert s["compiled"]["problems"] + s["runtime_size"]["problems"] == s["problems"]
    # the top-10 count: up to 10 picks a problem (fewer where it has fewer records)
    assert s["problems"] < s["top_picks"] <= 10 * s["problems"] and 0 < s["top_picks_compiled"] <= s["top_picks"]
    assert s["top_picks_compiled"] >= s["compiled"]["problems"] > 0
    # --uncompiled-list: the split list's own entries, those with a top-10 pick not timed as
    # compiled, in a form respec --split-list reads
    items, picked = json.loads(split.read_text()), json.loads(sub.read_text())
    assert len(picked) == s["problems_top_uncompiled"] and all(x in items for x in picked)
    assert (s["top_picks"] - s["top_picks_compiled"] > 0) == (len(picked) > 0)
    assert sps.read_split_list(str(sub)) == {sps.problem_key(x) for x in picked}
