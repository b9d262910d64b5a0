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


FAKE_COLLECTOR = r'''
import json, os, sys, time
from torch_diode import wire
from torch_diode.collect import records
STARTUP, COLD, WARM = 0.3, 0.2, 0.01
warm = False
def collect(spec_path, out):
    global warm
    spec = json.load(open(spec_path))
    probs = [wire.problem_from_json(p) for p in spec["problems"]]
    walls = [WARM if warm else COLD] + [WARM] * (len(probs) - 1)
    time.sleep(sum(walls))
    warm = True
    hw = wire.HardwareId(vendor="nvidia", device_name="NVIDIA H100 80GB HBM3")
    open(out, "wb").write(records.build_shard(spec["shard_id"], "s", hw, "fake", "", probs, [],
                                              problem_wall_s=walls))
    return 0
if sys.argv[1] == "--help":
    sys.exit(0)
time.sleep(STARTUP)
MODE = os.environ.get("FAKE_SERVE", "ok")   # ok; fail_second: code 3; hang_first: no reply
if sys.argv[1] == "--serve":
    for n, line in enumerate(sys.stdin):
        req = json.loads(line)
        if n == 1 and MODE == "fail_second":
            code = 3
        elif MODE == "hang_first":
            time.sleep(600)
        else:
            code = collect(req["spec"], req["out"])
        print(json.dumps({"out": req["out"], "code": code}), flush=True)
else:
    sys.exit(collect(sys.argv[2], sys.argv[4]))
'''


def _fake_setup(tmp_path, mode="ok"):
    from torch_diode import wire
    fake = tmp_path / "fake_collector.py"
    fake.write_text(FAKE_COLLECTOR)
    p = wire.problem_from_json({"op": "mm", "batch": 1, "m": 64, "n": 64, "k": 64, "dtype_a": "float16",
                                "dtype_b": "float16", "dtype_out": "float16", "trans_a": False,
                                "trans_b": False, "bias": "none", "alpha": 1.0, "beta": 0.0})
    specs = []
    for i in range(3):
        specs.append(str(tmp_path / f"spec{i}.json"))
        json.dump({"shard_id": f"t/{i}", "problems": [wire.to_json(p)] * 3}, open(specs[-1], "w"))
    env = dict(__import__("os").environ, PYTHONPATH=str(ROOT / "python"), FAKE_SERVE=mode)
    return specs, [sys.executable, str(fake)], env


def test_serve_vs_oneshot_runs_both_arms_side_by_side(tmp_path, capsys):
    specs, cmd, env = _fake_setup(tmp_path)
    res = ct.serve_vs_oneshot(specs, str(tmp_path / "out"), cmd, env)
    one, served = res["oneshot"], res["served"]
    assert [s["code"] for s in one["specs"]] == [0, 0, 0] == [s["code"] for s in served["specs"]]
    assert one["problems"] == served["problems"] == 9
    # One-shot: every spec's first problem is cold; served: only the first spec's.
    assert one["first_problem_median_s"] == 0.2 and served["first_problem_median_s"] == 0.01
    assert one["other_problems_median_s"] == served["other_problems_median_s"] == 0.01
    # Three start-ups against one: the served arm is faster by about 2 x (0.3 + 0.2) s.
    assert one["wall_s"] - served["wall_s"] > 0.7
    assert res["oneshot_over_served_wall"] > 1.5
    ct.print_serve_vs_oneshot(res)
    out = capsys.readouterr().out
    assert "oneshot: 3 specs, 9 problems" in out and "served: 3 specs, 9 problems" in out
    assert "one-shot / served wall: " in out
    assert "ratio_unavailable" not in res


def test_a_failed_served_spec_gives_no_ratio_and_says_why(tmp_path, capsys):
    specs, cmd, env = _fake_setup(tmp_path, "fail_second")
    res = ct.serve_vs_oneshot(specs, str(tmp_path / "out"), cmd, env)
    assert [s["code"] for s in res["oneshot"]["specs"]] == [0, 0, 0]
    assert [s["code"] for s in res["served"]["specs"]] == [0, 3, 0]
    assert res["oneshot_over_served_wall"] is None
    assert "failed specs: served #1 (code 3)" in res["ratio_unavailable"]
    ct.print_serve_vs_oneshot(res)
    assert "one-shot / served wall: - (failed specs: served #1 (code 3))" in capsys.readouterr().out


def test_a_hung_served_spec_times_out_and_fails(tmp_path):
    import time
    specs, cmd, env = _fake_setup(tmp_path, "hang_first")
    t0 = time.monotonic()
    res = ct.serve_vs_oneshot(specs, str(tmp_path / "out"), cmd, env, timeout_s=2)
    served = res["served"]["specs"]
    assert [s["code"] for s in served] == [None, None, None]
    assert "no reply within 2 s (killed)" in served[0]["error"]
    assert all(s["error"].startswith("not sent: no reply within 2 s") for s in served[1:])
    assert 1.9 < served[0]["wall_s"] < 10 and time.monotonic() - t0 < 120
    assert res["oneshot_over_served_wall"] is None and "served #0 (code None), #1" in res["ratio_unavailable"]


def test_ratio_needs_the_same_problems_in_both_arms():
    arm = lambda problems: {"wall_s": 1.0, "problems": problems, "specs": [{"code": 0}]}
    assert ct.ratio_or_reason({"oneshot": arm(3), "served": arm(3)}) == (1.0, None)
    ratio, why = ct.ratio_or_reason({"oneshot": arm(3), "served": arm(2)})
    assert ratio is None and "oneshot 3, served 2" in why
