"""bench/hook_end_to_end.py --profile's compile_profile rows and bench/compile_profile_diff.py,
on a real cProfile of known functions and on a results.json with known numbers."""
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import compile_profile_diff as d  # noqa: E402
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


def _row(w, mode, compile_s, funcs):
    return {"workload": w, "mode": mode, "status": "ok", "compile_s": compile_s,
            "compile_profile": {"total_s": compile_s, "own": [],
                                "cumulative": [[f, 1, 0.0, c] for f, c in funcs]}}


def test_diff_orders_by_what_the_mode_spends_over_the_base(tmp_path, capsys):
    res = [_row("w", "plain", 1.0, [("a.py:1(compile)", 1.0), ("b.py:2(lower)", 0.4)]),
           _row("w", "diode_predict", 1.5, [("a.py:1(compile)", 1.5), ("b.py:2(lower)", 0.5),
                                             ("site-packages/torch_diode/hook.py:3(rank)", 0.3)])]
    rows = d.diff(res[0], res[1], top=10)
    assert [(round(x, 3), f) for x, _, f in rows] == [
        (0.5, "a.py:1(compile)"), (0.3, "site-packages/torch_diode/hook.py:3(rank)"), (0.1, "b.py:2(lower)")]
    p = tmp_path / "results.json"
    p.write_text(json.dumps({"results": res}))
    assert d.main([str(p), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "## w: diode_predict 1.500 s, plain 1.000 s" in out
    assert "torch_diode/hook.py:3(rank)" in out and "b.py:2(lower)" not in out   # --top 2, prefix cut
    assert d.main([str(p), "--mode", "diode_top5"]) == 2                        # no such rows: an error


def test_rank_threads_bench_runs_both_variants_and_restores_the_hook(tmp_path):
    import hook_rank_threads as r
    from test_hook_model import write_model_dir
    from torch_diode.hook import ranking
    before = (ranking._OneIntraOpThread.__enter__, ranking._OneIntraOpThread.__exit__)
    out = tmp_path / "rt.json"
    model = write_model_dir(str(tmp_path / "m"), hidden=16, blocks=2)
    assert r.main(["--model", model, "--reps", "1", "--load", "1", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["rankings"] == len(r.PROBLEMS) and res["load"] == 1
    assert res["one_thread_ms_median"] > 0 and res["default_threads_ms_median"] > 0
    assert abs(res["ratio_default_over_one"] - res["default_threads_ms_median"] / res["one_thread_ms_median"]) < 1e-9
    assert (ranking._OneIntraOpThread.__enter__, ranking._OneIntraOpThread.__exit__) == before


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
