"""bench/hook_end_to_end.py --profile's compile_profile rows, on a real cProfile of known
functions (bench/compile_profile_diff.py, which compared two modes' rows, is removed; git history)."""
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import hook_end_to_end as b  # noqa: E402


def _slow(s):
    t = time.perf_counter()
    while time.perf_counter() - t < s:
        pass


def _outer():
    _slow(0.05)
    _slow(0.02)


def test_profile_summary_lists_functions_by_cumulative_and_own_time():
    prof = b._compile_profiler(True)
    _outer()
    s = b.profile_summary(prof, top=50)
    cum = {row[0].rsplit("(", 1)[1][:-1]: row for row in s["cumulative"]}
    assert cum["_outer"][1] == 1 and cum["_slow"][1] == 2          # calls
    assert cum["_outer"][3] >= 0.07 and cum["_outer"][2] < 0.01     # cumulative, own
    assert s["total_s"] >= 0.07
    assert [r[3] for r in s["cumulative"]] == sorted((r[3] for r in s["cumulative"]), reverse=True)
    assert [r[2] for r in s["own"]] == sorted((r[2] for r in s["own"]), reverse=True)
    assert b._compile_profiler(False) is None


def test_smoke_cpu_workers_profile_the_compile_and_time_the_install(tmp_path):
    """The workers' real path (torch.compile on CPU, tiny shapes): each compile mode's row
    carries its profile; predict's install time is its own, after Inductor's shared import."""
    import subprocess
    out = tmp_path / "e2e"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "hook_end_to_end.py"), "--smoke-cpu", "--workloads",
                        "l3_kv_m4", "--modes", "plain,diode_predict", "--profile", "--reps", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = {r["mode"]: r for r in json.loads((out / "results.json").read_text())["results"]}
    for mode in ("plain", "diode_predict"):
        assert rows[mode]["status"] == "ok"
        prof = rows[mode]["compile_profile"]
        assert prof["cumulative"] and prof["total_s"] > 0
    assert rows["diode_predict"]["install_s"] > 0 and "install_s" not in rows["plain"]
