"""bench/collector_throughput.py's stage breakdown (no GPU): where a collection's seconds went."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import collector_throughput as ct  # noqa: E402


def test_breakdown_per_stage_and_static_records():
    probs = [{"lower_s": 0.4, "compile_wait_s": 30.0, "time_s": 5.0, "static_s": 2.0, "wall_s": 38.0,
              "static": 11, "static_failed": 0, "retimed": 3, "mismatched": 0},
             {"lower_s": 0.2, "compile_wait_s": 0.0, "time_s": 1.0, "static_s": 1.0, "wall_s": 2.5,
              "static": 10, "static_failed": 1, "retimed": 0, "mismatched": 1},
             {"lower_s": 0.6, "compile_wait_s": 10.0, "time_s": 3.0, "static_s": 4.0, "wall_s": 18.0,
              "static": 11, "static_failed": 0, "retimed": 1, "mismatched": 0}]
    b = ct.stage_breakdown(probs)
    assert b["problems"] == 3
    assert b["static_s"] == {"median": 2.0, "total": 7.0}
    assert b["wall_s"]["median"] == 18.0 and b["compile_wait_s"]["total"] == 40.0
    assert (b["static"], b["static_failed"], b["retimed"], b["mismatched"]) == (32, 1, 4, 1)


def test_breakdown_of_a_collector_without_the_static_stage(tmp_path):
    old = [{"lower_s": 0.5, "compile_wait_s": 1.0, "time_s": 2.0, "wall_s": 3.5, "retimed": 2, "mismatched": 0}]
    b = ct.stage_breakdown(old)
    assert "static_s" not in b and "static" not in b and b["retimed"] == 2   # 2.1.0 had no such stage
    f = tmp_path / "part.msgpack.stats.json"
    f.write_text(json.dumps({"engine": "v2", "problems": old}))
    r = subprocess.run([sys.executable, str(ROOT / "bench/collector_throughput.py"), "--breakdown", str(f)],
                       capture_output=True, text=True, check=True)
    assert "stages over 1 problems: lower 0.5 s median" in r.stdout and "static" not in r.stdout
    assert "retimed 2" in r.stdout


def test_empty_breakdown():
    assert ct.stage_breakdown([]) == {"problems": 0}


def test_breakdown_sums_static_chased_of_collector_2_4_0():
    probs = [{"wall_s": 3.0, "static": 12, "static_beaten": 0, "static_chased": 2},
             {"wall_s": 2.0, "static": 10, "static_beaten": 1, "static_chased": 1},
             {"wall_s": 1.0, "static": 10, "static_beaten": 0}]          # a 2.3.0 problem: no such key
    b = ct.stage_breakdown(probs)
    assert b["static_chased"] == 3 and b["static_beaten"] == 1
    assert "static_chased" not in ct.stage_breakdown([{"wall_s": 1.0, "static": 3}])
